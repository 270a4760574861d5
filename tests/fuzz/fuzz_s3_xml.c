/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness of the proxy's S3 XML reader and the DeleteObjects / CompleteMultipartUpload decoders. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* The module is self-contained (libc only): compiled into the harness. */
#include "../../proxy/s3/xml.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = NULL;
	px_xml_doc_t *d = px_xml_parse((const char *)data, size, &why);
	px_s3_delete_req_t del;
	px_s3_part_t *parts = NULL;
	int n = 0;

	if (d != NULL) {
		const px_xml_node_t *root = px_xml_root(d);
		(void)px_xml_child(root, "Object");
		px_xml_doc_free(d);
	}
	if (px_s3_parse_delete((const char *)data, size, &del, &why) == 0)
		px_s3_delete_req_free(&del);
	if (px_s3_parse_complete((const char *)data, size, &parts, &n, &why) == 0)
		free(parts);
	/* The builder must escape whatever a key holds. */
	px_xml_t x;
	px_xml_init(&x);
	px_xml_elem_n(&x, "Key", (const char *)data, size);
	px_xml_free(&x);
	return 0;
}
