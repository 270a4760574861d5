// Puts, reads, lists, copies keys S3 accepts but a file system path cannot be, with the AWS SDK for JavaScript v3.
"use strict";
// Usage: node s3_keys.js '{"endpoint": ..., "access": ..., "secret": ..., "bucket": ..., "keys": [...]}'
// Each key's body is "body of '<key>'" (the Python test's _body). Prints {"ok": true, "got": {key: body},
// "listed": [...], "folder": {"keys", "prefixes"}, "too_long": {"name", "status"}, "copied": body}.
const {
	S3Client,
	PutObjectCommand,
	GetObjectCommand,
	ListObjectsV2Command,
	CopyObjectCommand,
} = require("@aws-sdk/client-s3");

function body(key) {
	// the same text as the Python test's _body: "body of %r" % key
	return "body of " + pyrepr(key);
}

function pyrepr(s) {
	const q = s.includes("'") && !s.includes('"') ? '"' : "'";
	let out = q;
	for (const ch of s) {
		if (ch === q || ch === "\\") out += "\\" + ch;
		else out += ch;
	}
	return out + q;
}

async function listAll(client, params) {
	const keys = [], prefixes = [];
	let token;
	do {
		const r = await client.send(new ListObjectsV2Command({ ...params, MaxKeys: 3, ContinuationToken: token }));
		for (const o of r.Contents || []) keys.push(o.Key);
		for (const p of r.CommonPrefixes || []) prefixes.push(p.Prefix);
		token = r.IsTruncated ? r.NextContinuationToken : undefined;
	} while (token);
	return { keys, prefixes };
}

async function main() {
	const a = JSON.parse(process.argv[2]);
	const client = new S3Client({
		endpoint: a.endpoint,
		region: "us-east-1",
		forcePathStyle: true,
		credentials: { accessKeyId: a.access, secretAccessKey: a.secret },
		maxAttempts: 1,
	});
	const B = a.bucket;
	for (const k of a.keys) await client.send(new PutObjectCommand({ Bucket: B, Key: k, Body: body(k) }));
	const got = {};
	for (const k of a.keys) {
		const r = await client.send(new GetObjectCommand({ Bucket: B, Key: k }));
		got[k] = await r.Body.transformToString();
	}
	const listed = (await listAll(client, { Bucket: B })).keys;
	const folder = await listAll(client, { Bucket: B, Prefix: "folder/", Delimiter: "/" });
	let too_long;
	try {
		await client.send(new PutObjectCommand({ Bucket: B, Key: "k".repeat(1025), Body: "x" }));
		too_long = { ok: true };
	} catch (e) {
		too_long = { name: e.name, status: e.$metadata ? e.$metadata.httpStatusCode : undefined };
	}
	await client.send(new CopyObjectCommand({ Bucket: B, Key: "copy/of//it/", CopySource: B + "/" +
		encodeURIComponent("a//b") }));
	const c = await client.send(new GetObjectCommand({ Bucket: B, Key: "copy/of//it/" }));
	const copied = await c.Body.transformToString();
	await client.send(new PutObjectCommand({ Bucket: B, Key: "copy/of//it/", Body: "" }));
	return { ok: true, got, listed, folder, too_long, copied };
}

main().then(
	(r) => {
		process.stdout.write(JSON.stringify(r) + "\n");
	},
	(e) => {
		const status = e.$metadata ? e.$metadata.httpStatusCode : undefined;
		process.stdout.write(JSON.stringify({ ok: false, name: e.name || e.Code, status, message: e.message }) + "\n");
	}
);
