/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for AIStore's GetBatch request (MossReq) read as FastTier's batch request: fields, defaults, refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/moss.h"

static json_t *translate(const char *body, const char *bucket, const char *provider, int *status, char *why, size_t cap)
{
	return ft_moss_to_batch(body, strlen(body), bucket, provider, status, why, cap);
}

static const char *item_str(const json_t *doc, size_t i, const char *key)
{
	return json_string_value(json_object_get(json_array_get(json_object_get(doc, "in"), i), key));
}

static void test_items_and_defaults(void **state)
{
	const char *body = "{\"in\":[{\"objname\":\"a\"},"
			   "{\"objname\":\"b\",\"bucket\":\"other\",\"provider\":\"s3\",\"archpath\":\"m/1.jpg\"},"
			   "{\"objname\":\"c\",\"start\":5,\"length\":7,\"opaque\":\"aWQ=\"},"
			   "{\"objname\":\"d\",\"bucket\":\"\",\"provider\":\"\",\"archpath\":\"\"}],"
			   "\"mime\":\".tar\",\"coer\":true,\"onob\":true,\"strm\":true,\"coloc\":1}";
	char why[200] = "";
	int status = -1;
	json_t *doc = translate(body, "ds", "gcp", &status, why, sizeof(why));

	(void)state;
	assert_non_null(doc);
	assert_int_equal(status, 0);
	assert_int_equal(json_array_size(json_object_get(doc, "in")), 4);
	assert_true(json_is_true(json_object_get(doc, "continue_on_error")));
	assert_true(json_is_true(json_object_get(doc, "only_objname")));
	assert_string_equal(item_str(doc, 0, "bucket"), "ds"); /* the URL's bucket and provider */
	assert_string_equal(item_str(doc, 0, "provider"), "gcp");
	assert_null(item_str(doc, 0, "archpath"));
	assert_string_equal(item_str(doc, 1, "bucket"), "other");
	assert_string_equal(item_str(doc, 1, "provider"), "aws"); /* AIStore's s3 */
	assert_string_equal(item_str(doc, 1, "archpath"), "m/1.jpg");
	json_t *c = json_array_get(json_object_get(doc, "in"), 2);
	assert_int_equal(json_integer_value(json_object_get(c, "start")), 5);
	assert_int_equal(json_integer_value(json_object_get(c, "length")), 7);
	assert_string_equal(item_str(doc, 2, "opaque"), "aWQ="); /* echoed in a buffered answer's metadata */
	assert_false(json_is_true(json_object_get(doc, "buffered")));
	assert_string_equal(item_str(doc, 3, "bucket"), "ds"); /* empty strings are absent fields */
	assert_null(item_str(doc, 3, "archpath"));
	json_decref(doc);

	doc = translate("{\"in\":[{\"objname\":\"a\"}],\"strm\":true}", "ds", NULL, &status, why, sizeof(why));
	assert_non_null(doc);
	assert_string_equal(item_str(doc, 0, "provider"), "ais");
	assert_false(json_is_true(json_object_get(doc, "continue_on_error")));
	assert_false(json_is_true(json_object_get(doc, "only_objname")));
	json_decref(doc);
}

/* "strm" false or absent (AIStore's default) asks for the buffered answer; a "length" of -1 reads to the end. */
static void test_buffered_and_whole_length(void **state)
{
	static const char *bodies[] = {"{\"in\":[{\"objname\":\"a\",\"length\":-1}]}",
				       "{\"in\":[{\"objname\":\"a\",\"length\":-1}],\"strm\":false}"};
	char why[200];
	int status;

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		json_t *doc = translate(bodies[i], "ds", NULL, &status, why, sizeof(why));
		assert_non_null(doc);
		assert_true(json_is_true(json_object_get(doc, "buffered")));
		assert_null(json_object_get(json_array_get(json_object_get(doc, "in"), 0), "length"));
		json_decref(doc);
	}
}

static void test_refused(void **state)
{
	static const struct {
		const char *body, *bucket, *word;
		int status;
	} cases[] = {
		{"{\"in\":[{\"objname\":\"a\"}],\"strm\":true,\"mime\":\".zip\"}", "ds", ".zip", 501},
		{"{\"in\":[{\"objname\":\"a\",\"uname\":\"x\"}],\"strm\":true}", "ds", "uname", 501},
		{"{\"in\":[],\"strm\":true}", "ds", "MossReq", 400},
		{"{\"in\":{},\"strm\":true}", "ds", "MossReq", 400},
		{"[1,2]", "ds", "MossReq", 400},
		{"{\"in\":[{\"objname\":\"a\"}", "ds", "MossReq", 400},
		{"{\"in\":[{\"objname\":7}],\"strm\":true}", "ds", "objname", 400},
		{"{\"in\":[\"a\"],\"strm\":true}", "ds", "objname", 400},
		{"{\"in\":[{\"objname\":\"a\"}],\"strm\":true}", "", "bucket", 400},
		{"{\"in\":[{\"objname\":\"a\"}],\"strm\":true}", NULL, "bucket", 400},
	};
	char why[200];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int status = 0;
		why[0] = '\0';
		json_t *doc = translate(cases[i].body, cases[i].bucket, "ais", &status, why, sizeof(why));
		if (doc != NULL || status != cases[i].status || strstr(why, cases[i].word) == NULL)
			fail_msg("case %zu: %s status %d why \"%s\"", i, doc ? "accepted" : "refused", status, why);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_items_and_defaults),
		cmocka_unit_test(test_buffered_and_whole_length),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
