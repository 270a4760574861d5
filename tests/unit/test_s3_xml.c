/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the proxy's S3 XML module: escaping, error documents, the strict reader and its two request documents. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* White-box: the module is self-contained (libc only), so it is compiled into this test. */
#include "../../proxy/s3/xml.c"

static void test_escape(void **state)
{
	px_xml_t x;

	(void)state;
	px_xml_init(&x);
	px_xml_elem(&x, "Key", "a&b<c>d\"e'f\tg\x01h/ü");
	assert_false(x.failed);
	assert_non_null(strstr(x.p, "<Key>a&amp;b&lt;c&gt;d&quot;e&apos;f&#9;g&#1;h/ü</Key>"));
	assert_memory_equal(x.p, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 39);
	px_xml_free(&x);
}

static void test_elemf_long(void **state)
{
	px_xml_t x;
	char big[1000];

	(void)state;
	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	px_xml_init(&x);
	px_xml_elemf(&x, "T", "%s-%d", big, 7);
	assert_non_null(strstr(x.p, "zzz-7</T>"));
	px_xml_free(&x);
}

static void test_error_doc(void **state)
{
	px_xml_t x;

	(void)state;
	px_xml_error_doc(&x, PX_S3_NO_SUCH_KEY, NULL, "/b/k&", "ABC");
	assert_non_null(strstr(x.p, "<Error><Code>NoSuchKey</Code><Message>"));
	assert_non_null(strstr(x.p, "<Resource>/b/k&amp;</Resource><RequestId>ABC</RequestId></Error>"));
	px_xml_free(&x);
	assert_int_equal(px_s3_err_status(PX_S3_INVALID_RANGE), 416);
	assert_string_equal(px_s3_err_code(PX_S3_TIME_SKEWED), "RequestTimeTooSkewed");
	assert_string_equal(px_s3_err_code(PX_S3_ERR_COUNT), "InternalError"); /* out of range */
	for (int e = 0; e < PX_S3_ERR_COUNT; e++) {
		assert_non_null(errors[e].code);
		assert_true(errors[e].status >= 200 && errors[e].status < 600);
	}
}

static void test_parse_tree(void **state)
{
	const char *doc = "\xEF\xBB\xBF<?xml version=\"1.0\"?><!-- c --><s3:Root xmlns:s3=\"x\" a='1'>"
			  "<A>t&lt;1&#x41;&#66;<![CDATA[<raw>]]></A><B/><A>second</A></s3:Root>\n";
	const char *why = NULL;
	px_xml_doc_t *d = px_xml_parse(doc, strlen(doc), &why);
	const px_xml_node_t *root, *a;

	(void)state;
	assert_non_null(d);
	root = px_xml_root(d);
	assert_string_equal(root->name, "Root");
	a = px_xml_child(root, "A");
	assert_string_equal(a->text, "t<1AB<raw>");
	assert_string_equal(a->next->name, "B");
	assert_null(a->next->text);
	assert_string_equal(a->next->next->text, "second");
	assert_null(px_xml_child(root, "C"));
	px_xml_doc_free(d);
}

static void test_parse_rejects(void **state)
{
	static const char *const bad[] = {
		"",
		"   ",
		"text",
		"<a>",
		"<a></b>",
		"<a><b></a></b>",
		"<a>x</a><b/>",
		"<a>x</a>trailing",
		"<!DOCTYPE a [<!ENTITY e \"x\">]><a>&e;</a>",
		"<a>&e;</a>",
		"<a>&#0;</a>",
		"<a>&#xD800;</a>",
		"<a>&#x110000;</a>",
		"<a b=c/>",
		"<a b=\"<\"/>",
		"<a><!-- open</a>",
		"<a><![CDATA[x</a>",
		"<a><?pi x?></a>",
		"<:/>",
	};
	const char *why;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		px_xml_doc_t *d = px_xml_parse(bad[i], strlen(bad[i]), &why);
		if (d != NULL)
			fail_msg("accepted: %s", bad[i]);
		assert_non_null(why);
	}
	/* A NUL inside the document */
	why = NULL;
	assert_null(px_xml_parse("<a>x\0y</a>", 10, &why));
}

static void test_parse_depth_limit(void **state)
{
	char buf[2000];
	size_t n = 0;
	const char *why;

	(void)state;
	for (int i = 0; i < 100; i++)
		n += (size_t)sprintf(buf + n, "<a>");
	for (int i = 0; i < 100; i++)
		n += (size_t)sprintf(buf + n, "</a>");
	assert_null(px_xml_parse(buf, n, &why));
	assert_string_equal(why, "elements nested too deeply");
}

static void test_delete_doc(void **state)
{
	const char *doc = "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>"
			  "<Object><Key> spaced key </Key></Object><Object><Key>a&amp;b</Key><VersionId>v</VersionId>"
			  "</Object></Delete>";
	px_s3_delete_req_t d;
	const char *why = NULL;

	(void)state;
	assert_int_equal(px_s3_parse_delete(doc, strlen(doc), &d, &why), 0);
	assert_true(d.quiet);
	assert_int_equal(d.n, 2);
	assert_int_equal(d.key_lens[0], 12);
	assert_memory_equal(d.keys[0], " spaced key ", 12);
	assert_string_equal(d.keys[1], "a&b");
	px_s3_delete_req_free(&d);

	static const char *const bad[] = {
		"<Delete></Delete>",
		"<Delete><Object></Object></Delete>",
		"<Other><Object><Key>a</Key></Object></Other>",
		"<Delete><Quiet>maybe</Quiet><Object><Key>a</Key></Object></Delete>",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(px_s3_parse_delete(bad[i], strlen(bad[i]), &d, &why), -1);
}

static void test_complete_doc(void **state)
{
	const char *doc =
		"<CompleteMultipartUpload><Part><PartNumber> 2 </PartNumber><ETag>&quot;abc&quot;</ETag></Part>"
		"<Part><ETag>def</ETag><PartNumber>10000</PartNumber></Part></CompleteMultipartUpload>";
	px_s3_part_t *parts = NULL;
	const char *why = NULL;
	int n = 0;

	(void)state;
	assert_int_equal(px_s3_parse_complete(doc, strlen(doc), &parts, &n, &why), 0);
	assert_int_equal(n, 2);
	assert_int_equal(parts[0].part, 2);
	assert_string_equal(parts[0].etag, "abc");
	assert_int_equal(parts[1].part, 10000);
	assert_string_equal(parts[1].etag, "def");
	free(parts);

	static const char *const bad[] = {
		"<CompleteMultipartUpload></CompleteMultipartUpload>",
		"<CompleteMultipartUpload><Part><PartNumber>0</PartNumber><ETag>a</ETag></Part></CompleteMultipartUpload>",
		"<CompleteMultipartUpload><Part><PartNumber>10001</PartNumber><ETag>a</ETag></Part></CompleteMultipartUpload>",
		"<CompleteMultipartUpload><Part><PartNumber>x</PartNumber><ETag>a</ETag></Part></CompleteMultipartUpload>",
		"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>",
		"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"\"</ETag></Part></CompleteMultipartUpload>",
		"<Complete><Part><PartNumber>1</PartNumber><ETag>a</ETag></Part></Complete>",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(px_s3_parse_complete(bad[i], strlen(bad[i]), &parts, &n, &why), -1);
		assert_null(parts);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape),        cmocka_unit_test(test_elemf_long),
		cmocka_unit_test(test_error_doc),     cmocka_unit_test(test_parse_tree),
		cmocka_unit_test(test_parse_rejects), cmocka_unit_test(test_parse_depth_limit),
		cmocka_unit_test(test_delete_doc),    cmocka_unit_test(test_complete_doc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
