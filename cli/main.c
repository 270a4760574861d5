/* SPDX-License-Identifier: Apache-2.0 */
/* ft, the FastTier command-line client: command line, endpoint and credentials, help, dispatch to the groups. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft.h"

/*
 * DESIGN
 * "ft <group> <verb> [args] [--options]" as kubectl and ais spell it. Options may come anywhere
 * after the program name; "--" ends them. The endpoint and token come from --endpoint/--token,
 * else FT_ENDPOINT/FT_TOKEN, else ~/.config/ft/config.json ({"endpoint": ..., "token": ...}),
 * (the CA bundle for https the same way: --cacert, FT_CACERT, "cacert"),
 * else http://localhost:51080. Every command has --help; output is a table (or a few lines) by
 * default and JSON with --json.
 */

#define DEFAULT_ENDPOINT "http://localhost:51080"

/* Options that take a value (the others are flags). */
static const char *const valued[] = {
	"endpoint", "token",   "cacert",     "set",     "provider", "workers",         "prefix",
	"template", "to",      "objnames",   "urls",    "url-list", "output",          "o",
	"checksum", "backend", "timeout",    "limit",   "interval", "output-template", "shard-size",
	"order",    "seed",    "order-file", "etl",     "url",      "max-output",      "procs",
	"format",   "spec",    "kind",       "prepend", "ext",      "etl-timeout"};

static const struct {
	const char *cmd, *text;
} helps[] = {
	{"",
	 "Usage: ft <command> [arguments] [options]\n\n"
	 "Commands:\n"
	 "  bucket ls|create|rm|props     buckets of the cluster\n"
	 "  object ls|put|get|rm|cat      objects (put and get of a directory with -r; get-batch: many as one TAR)\n"
	 "  job start|ls|show|wait|stop   batch jobs: prefetch, evict, copy, transform, download, dsort, archive,\n"
	 "                                rebalance\n"
	 "  etl init|ls|show|rm           transformers (ETL) for GET ?etl= and transform jobs\n"
	 "  cluster show                  the cluster map and each node's state\n\n"
	 "Global options:\n"
	 "  --endpoint URL   proxy URL (env FT_ENDPOINT, ~/.config/ft/config.json; default " DEFAULT_ENDPOINT ")\n"
	 "  --token T        bearer token sent as Authorization (env FT_TOKEN, config \"token\")\n"
	 "  --cacert FILE    CA bundle (PEM) for an https endpoint instead of the system's (env FT_CACERT,\n"
	 "                   config \"cacert\")\n"
	 "  --json           machine-readable output\n"
	 "  --help           help of any command (ft bucket --help, ft job start --help)\n\n"
	 "Buckets: NAME or ais://NAME; s3://, gs://, az://, ht:// name remote buckets.\n"
	 "Exit codes: 0 ok, 1 failed (an error answer, failed objects, a job that failed), 2 usage, 3 cannot connect.\n"},
	{"bucket", "Usage: ft bucket ls|create|rm|props ...\n"
		   "  ft bucket ls [PROVIDER] [--present]  list the buckets (of a provider's account: s3:, gs:, az:)\n"
		   "  ft bucket create BUCKET [--checksum TYPE] [--backend JSON]\n"
		   "  ft bucket rm BUCKET                  destroy the bucket and its objects\n"
		   "  ft bucket props BUCKET [--set k=v]   show (or set) properties, e.g. --set mirror.copies=2\n"},
	{"bucket ls",
	 "Usage: ft bucket ls [PROVIDER | --provider P] [--present] [--json]\n"
	 "Lists the cluster's buckets: name, provider, checksum, created. With a remote PROVIDER (s3:, gs:,\n"
	 "az:; aws, gcp, azure) lists every bucket the targets' account of that provider sees: name, provider,\n"
	 "whether the cluster has it (present) and as which of its buckets; --present: only the cluster's\n"
	 "buckets of that provider (also for ht:, which has no account to list).\n"},
	{"bucket create",
	 "Usage: ft bucket create BUCKET [--checksum TYPE] [--backend JSON]\n"
	 "Creates an ais bucket, or a remote one (s3://, gs://, az://, ht://) with --backend '{\"endpoint\":...}'.\n"
	 "TYPE: xxhash (the default), md5, xxh3, crc32c, sha256 or sha512.\n"},
	{"bucket rm", "Usage: ft bucket rm BUCKET\nDestroys the bucket with all its objects.\n"},
	{"bucket props",
	 "Usage: ft bucket props BUCKET [--set KEY=VALUE]...\n"
	 "Shows the bucket's properties; --set changes one (mirror.copies=2, ec.data_slices=2, checksum.type=xxh3,\n"
	 "...). A new checksum type applies to objects stored from then on.\n"},
	{"object", "Usage: ft object ls|put|get|get-batch|rm|cat ...\n"
		   "  ft object ls BUCKET [--prefix P] [--limit N]\n"
		   "  ft object put FILE|DIR BUCKET[/NAME] [-r] [--workers N]\n"
		   "  ft object get BUCKET/NAME|BUCKET [DEST] [-r] [--prefix P] [--workers N]\n"
		   "  ft object rm BUCKET/NAME...\n"
		   "  ft object cat BUCKET/NAME [--etl NAME]\n"
		   "  ft object get-batch BUCKET/NAME... | --spec FILE [-o FILE] [--continue-on-error]\n"},
	{"object ls",
	 "Usage: ft object ls BUCKET [--prefix P] [--limit N] [--json]\nLists the objects: name, size, version.\n"},
	{"object put",
	 "Usage: ft object put FILE BUCKET[/NAME]\n"
	 "       ft object put DIR BUCKET[/PREFIX] -r [--workers N]\n"
	 "Uploads a file (NAME defaults to the file's name), or every file under DIR (names relative to DIR,\n"
	 "after PREFIX) on N parallel workers (default 8). A progress bar shows on a terminal.\n"},
	{"object get",
	 "Usage: ft object get BUCKET/NAME [FILE|-]\n"
	 "       ft object get BUCKET DIR -r [--prefix P] [--workers N]\n"
	 "Downloads one object (to FILE, default the name's last segment; - for stdout), or with -r every\n"
	 "object under the prefix into DIR (names become paths).\n"},
	{"object rm", "Usage: ft object rm BUCKET/NAME...\nDeletes objects.\n"},
	{"object get-batch",
	 "Usage: ft object get-batch BUCKET/NAME... [-o FILE|-] [--continue-on-error] [--only-objname]\n"
	 "       ft object get-batch --spec FILE|- [-o FILE|-] [--continue-on-error] [--only-objname]\n"
	 "Reads many objects, of any buckets, as one TAR in the order given (GetBatch, docs/shards.md): members\n"
	 "named BUCKET/NAME (NAME alone with --only-objname). --spec FILE holds the request of POST /v1/batch\n"
	 "({\"in\":[{\"bucket\",\"objname\",\"archpath\",\"start\",\"length\"}...]}) for shard members and ranges.\n"
	 "A missing object fails the batch; with --continue-on-error it is an empty member __404__/BUCKET/NAME.\n"
	 "-o FILE is written only when the whole TAR came (through FILE.ft-part); without -o (or -o -) the TAR goes\n"
	 "to stdout, which must not be a terminal.\n"},
	{"object cat", "Usage: ft object cat BUCKET/NAME [--etl NAME]\n"
		       "Writes the object to stdout (with --etl: through that transformer, ft etl ls).\n"},
	{"job",
	 "Usage: ft job start|ls|show|wait|stop ...\n"
	 "  ft job start prefetch|evict BUCKET (--objnames a,b | --template T | --prefix P) [--wait]\n"
	 "  ft job start copy SRC DST [--prefix P | --objnames a,b | --template T] [--dry-run] [--latest]\n"
	 "                            [--sync] [--force] [--etl NAME [--etl-timeout MS]] [--prepend STR]\n"
	 "                            [--ext jpg=png,...] [--wait]\n"
	 "  ft job start transform SRC DST --etl NAME [--prefix P | --objnames a,b | --template T] [--wait]\n"
	 "  ft job start download BUCKET (URL... | --template URL | --url-list OBJECT) [--wait]\n"
	 "  ft job start dsort SRC DST (--template T | --prefix P) --output-template T --shard-size BYTES\n"
	 "                             [--order alphanumeric|shuffle|file] [--seed N] [--order-file OBJ] [--wait]\n"
	 "  ft job start archive BUCKET ARCHNAME (--objnames a,b | --template T | --prefix P) [--to DST]\n"
	 "                            [--format .tar] [--shard-size BYTES] [--include-src-bucket]\n"
	 "                            [--continue-on-error] [--wait]\n"
	 "  ft job start rebalance    move every object to its owner now (role admin) [--wait]\n"
	 "  ft job ls                 jobs the cluster knows\n"
	 "  ft job show ID            one job, per target\n"
	 "  ft job wait ID            a progress bar until it ends (exit 1 when it failed or had errors)\n"
	 "  ft job stop ID            abort\n"},
	{"job start",
	 "Usage: ft job start KIND ... [--wait]\n"
	 "  prefetch BUCKET (--objnames a,b | --template 'x-{000..099}' | --prefix P)\n"
	 "  evict BUCKET (--objnames a,b | --template T | --prefix P)\n"
	 "  copy SRC DST [--prefix P | --objnames a,b | --template T] [--dry-run] [--latest] [--sync] [--force]\n"
	 "       [--etl NAME [--etl-timeout MS]] [--prepend STR] [--ext jpg=png,...]\n"
	 "       (--prepend: each copy is named STR<name>; --ext: a copy's extension jpg becomes png)\n"
	 "  transform SRC DST --etl NAME [--prefix P | --objnames a,b | --template T]  (a copy through NAME)\n"
	 "  download BUCKET (URL... | --template 'http://h/f-{00..99}.tar' | --url-list OBJECT)\n"
	 "  dsort SRC DST (--template 'in-{000..099}.tar' | --prefix P) --output-template 'out-{0000..0999}.tar'\n"
	 "        --shard-size BYTES [--order alphanumeric|shuffle|file] [--seed N] [--order-file OBJECT]\n"
	 "  archive BUCKET ARCHNAME (--objnames a,b | --template T | --prefix P) [--to DST] [--format F]\n"
	 "          [--shard-size BYTES] [--include-src-bucket] [--continue-on-error]\n"
	 "          (with --shard-size, ARCHNAME 'out-{0000..}.tar' names the shards; see docs/archive.md)\n"
	 "  rebalance  (every target moves the objects it holds but does not own to their owners; role admin)\n"
	 "Prints the job id; with --wait shows its progress until it ends.\n"},
	{"job ls", "Usage: ft job ls [--json]\nLists the jobs: id, kind, bucket, state, objects, bytes, errors.\n"},
	{"job show", "Usage: ft job show ID [--json]\nShows a job and each target's part.\n"},
	{"job wait", "Usage: ft job wait ID [--interval MS]\n"
		     "Shows the job's progress (objects, bytes, rate, ETA) until it ends: a bar on a terminal, a line\n"
		     "every few seconds otherwise. Exit 0 finished without errors, 1 otherwise.\n"},
	{"job stop", "Usage: ft job stop ID\n"
		     "       ft job stop --kind KIND [BUCKET]\n"
		     "       ft job stop --all [BUCKET]\n"
		     "Aborts the job on every target; with --kind, every running job of KIND (prefetch, evict,\n"
		     "evict-bucket, delete, copy, download, dsort, archive, mirror, ec-encode, scrub, rebalance,\n"
		     "resilver), with --all every running job of any kind; only those of BUCKET when given; prints\n"
		     "the ids stopped.\n"},
	{"etl", "Usage: ft etl init|ls|show|rm ...\n"
		"  ft etl init NAME [--] ARGV...   register a command (stdin: the object, stdout: the result)\n"
		"  ft etl init NAME --url URL      register a transformer server (POSTed each object)\n"
		"  ft etl ls                       list the transformers\n"
		"  ft etl show NAME                one transformer\n"
		"  ft etl rm NAME...               remove transformers\n"},
	{"etl init", "Usage: ft etl init NAME [--timeout MS] [--max-output BYTES] [--procs N] [--] ARGV...\n"
		     "       ft etl init NAME --url URL [--timeout MS] [--max-output BYTES] [--procs N]\n"
		     "Registers a transformer (admin). A command runs once per object, without a shell; put '--'\n"
		     "before an ARGV with options: ft etl init upper -- tr a-z A-Z. Defaults: --timeout 30000,\n"
		     "--max-output 268435456, --procs 4 (at once per target). Use: ft object cat B/O --etl NAME,\n"
		     "curl '.../v1/objects/B/O?etl=NAME', ft job start transform SRC DST --etl NAME.\n"},
	{"etl ls", "Usage: ft etl ls [--json]\nLists the transformers: name, kind, what runs, limits.\n"},
	{"etl show", "Usage: ft etl show NAME [--json]\nShows one transformer.\n"},
	{"etl rm", "Usage: ft etl rm NAME...\nRemoves transformers (admin).\n"},
	{"cluster", "Usage: ft cluster show [--json]\n"},
	{"cluster show", "Usage: ft cluster show [--json]\n"
			 "Shows the cluster map: proxies and targets, their URLs, state and mountpaths.\n"},
};

const char *cli_opt(const ft_cli_t *c, const char *name)
{
	const char *v = NULL;

	for (int i = 0; i < c->n_opts; i++)
		if (strcmp(c->opts[i].name, name) == 0)
			v = c->opts[i].value;
	return v;
}

bool cli_flag(const ft_cli_t *c, const char *name)
{
	return cli_opt(c, name) != NULL;
}

long cli_opt_int(const ft_cli_t *c, const char *name, long def, long lo, long hi)
{
	const char *v = cli_opt(c, name);
	char *end;
	long n;

	if (v == NULL)
		return def;
	n = strtol(v, &end, 10);
	if (*v == '\0' || *end != '\0' || n < lo || n > hi) {
		cli_fail(FT_EXIT_USAGE, "--%s must be a number from %ld to %ld", name, lo, hi);
		return -1;
	}
	return n;
}

int cli_fail(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("ft: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

int cli_bucket_parse(const char *arg, cli_bucket_t *b)
{
	static const struct {
		const char *scheme, *provider;
	} schemes[] = {{"ais://", "ais"}, {"s3://", "aws"},   {"aws://", "aws"},     {"gs://", "gcp"},
		       {"gcp://", "gcp"}, {"az://", "azure"}, {"azure://", "azure"}, {"ht://", "ht"}};
	const char *name = arg;

	snprintf(b->provider, sizeof(b->provider), "ais");
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		size_t n = strlen(schemes[i].scheme);
		if (strncmp(arg, schemes[i].scheme, n) == 0) {
			snprintf(b->provider, sizeof(b->provider), "%s", schemes[i].provider);
			name = arg + n;
			break;
		}
	}
	if (strstr(name, "://") != NULL) {
		cli_fail(FT_EXIT_USAGE, "unknown bucket scheme in \"%s\" (ais://, s3://, gs://, az://, ht://)", arg);
		return -1;
	}
	if (*name == '\0' || strlen(name) >= sizeof(b->name) || strchr(name, '/') != NULL) {
		cli_fail(FT_EXIT_USAGE, "bad bucket \"%s\"", arg);
		return -1;
	}
	snprintf(b->name, sizeof(b->name), "%s", name);
	return 0;
}

static bool takes_value(const char *name)
{
	for (size_t i = 0; i < sizeof(valued) / sizeof(valued[0]); i++)
		if (strcmp(name, valued[i]) == 0)
			return true;
	return false;
}

/* Splits argv into positionals and options; 0, or an exit code after a usage error. */
static int parse(ft_cli_t *c, int argc, char **argv)
{
	bool rest = false;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (rest || a[0] != '-' || strcmp(a, "-") == 0) {
			if (c->n_args == FT_CLI_MAX_ARGS)
				return cli_fail(FT_EXIT_USAGE, "too many arguments");
			c->args[c->n_args++] = a;
			continue;
		}
		if (strcmp(a, "--") == 0) {
			rest = true;
			continue;
		}
		const char *name = a + (a[1] == '-' ? 2 : 1), *eq = strchr(name, '=');
		static char names[FT_CLI_MAX_OPTS][64];
		size_t n = eq != NULL ? (size_t)(eq - name) : strlen(name);
		if (n == 0 || n >= sizeof(names[0]) || c->n_opts == FT_CLI_MAX_OPTS) /* named without its value */
			return cli_fail(FT_EXIT_USAGE, "bad option \"%.*s\"", (int)(name - a + (n < 64 ? n : 64)), a);
		memcpy(names[c->n_opts], name, n);
		names[c->n_opts][n] = '\0';
		name = names[c->n_opts];
		if (strcmp(name, "h") == 0)
			name = "help";
		if (strcmp(name, "r") == 0)
			name = "recursive";
		const char *value = "true";
		if (takes_value(name)) {
			if (eq != NULL)
				value = eq + 1;
			else if (i + 1 < argc)
				value = argv[++i];
			else
				return cli_fail(FT_EXIT_USAGE, "option --%s needs a value", name);
		} else if (eq != NULL) {
			return cli_fail(FT_EXIT_USAGE, "option --%s takes no value", name);
		}
		c->opts[c->n_opts].name = name;
		c->opts[c->n_opts].value = value;
		c->n_opts++;
	}
	return 0;
}

/* Endpoint, token and CA bundle: flags, then the environment, then ~/.config/ft/config.json. */
static void settings(ft_cli_t *c)
{
	static char endpoint[1024], token[4096], cacert[1024];
	const char *home = getenv("HOME"), *e = cli_opt(c, "endpoint"), *t = cli_opt(c, "token"),
		   *ca = cli_opt(c, "cacert");
	json_t *cfg = NULL;

	if (e == NULL)
		e = getenv("FT_ENDPOINT");
	if (t == NULL)
		t = getenv("FT_TOKEN");
	if (ca == NULL)
		ca = getenv("FT_CACERT");
	if ((e == NULL || t == NULL || ca == NULL) && home != NULL) {
		char path[1024];
		snprintf(path, sizeof(path), "%s/.config/ft/config.json", home);
		cfg = json_load_file(path, 0, NULL);
		if (e == NULL)
			e = json_string_value(json_object_get(cfg, "endpoint"));
		if (t == NULL)
			t = json_string_value(json_object_get(cfg, "token"));
		if (ca == NULL)
			ca = json_string_value(json_object_get(cfg, "cacert"));
	}
	if (ca != NULL && *ca) {
		snprintf(cacert, sizeof(cacert), "%s", ca);
		c->cacert = cacert;
	}
	snprintf(endpoint, sizeof(endpoint), "%s", e != NULL && *e ? e : DEFAULT_ENDPOINT);
	for (size_t n = strlen(endpoint); n > 0 && endpoint[n - 1] == '/'; n--)
		endpoint[n - 1] = '\0';
	c->endpoint = endpoint;
	if (t != NULL && *t) {
		snprintf(token, sizeof(token), "%s", t);
		c->token = token;
	}
	json_decref(cfg);
}

/* Prints the help of the deepest command named by the first args; 0, or -1 when there is none. */
static int print_help(const ft_cli_t *c, FILE *out)
{
	char cmd[128] = "";

	for (int depth = c->n_args < 2 ? c->n_args : 2; depth >= 0; depth--) {
		cmd[0] = '\0';
		for (int i = 0; i < depth; i++)
			snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "%s%s", i ? " " : "", c->args[i]);
		for (size_t i = 0; i < sizeof(helps) / sizeof(helps[0]); i++) {
			if (strcmp(helps[i].cmd, cmd) == 0) {
				fputs(helps[i].text, out);
				return 0;
			}
		}
	}
	return -1;
}

int main(int argc, char **argv)
{
	ft_cli_t c = {0};
	int rc = parse(&c, argc, argv);

	if (rc != 0)
		return rc;
	c.help = cli_flag(&c, "help");
	c.json = cli_flag(&c, "json");
	if (c.help || (c.n_args > 0 && strcmp(c.args[0], "help") == 0)) {
		if (!c.help) { /* "ft help bucket ls" */
			memmove(c.args, c.args + 1, sizeof(c.args[0]) * (size_t)(c.n_args - 1));
			c.n_args--;
		}
		print_help(&c, stdout);
		return FT_EXIT_OK;
	}
	if (c.n_args == 0) {
		print_help(&c, stderr);
		return FT_EXIT_USAGE;
	}
	settings(&c);
	cli_http_init(&c);
	if (strcmp(c.args[0], "bucket") == 0)
		return cli_bucket(&c);
	if (strcmp(c.args[0], "object") == 0)
		return cli_object(&c);
	if (strcmp(c.args[0], "job") == 0)
		return cli_job(&c);
	if (strcmp(c.args[0], "cluster") == 0)
		return cli_cluster(&c);
	if (strcmp(c.args[0], "etl") == 0)
		return cli_etl(&c);
	return cli_fail(FT_EXIT_USAGE, "unknown command \"%s\" (bucket, object, job, etl, cluster; ft --help)",
			c.args[0]);
}
