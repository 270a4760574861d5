// Runs one S3 operation with the AWS SDK for JavaScript v3 in its default configuration; prints a JSON result.
"use strict";
// Usage: node s3_jsv3.js OP '{"endpoint": ..., "access": ..., "secret": ..., "bucket": ..., "key": ..., ...}'
// OP: put-stream (a Readable body: the SDK sends STREAMING-UNSIGNED-PAYLOAD-TRAILER with a CRC32
// trailer), put-bytes, get, put-if-none-match, put-checksum (a given x-amz-checksum-crc32),
// upload (lib-storage's Upload of `size` bytes, multipart above 5 MiB; `checksum` and `checksum_type` for
// its ChecksumAlgorithm and ChecksumType), presign-get and presign-put (a URL from
// @aws-sdk/s3-request-presigner, then fetched), put-meta / get-meta (user metadata), create-bucket
// (`acl`: its canned ACL), put-acl (PutObject with the canned ACL `acl`), put-object-acl,
// put-bucket-acl, get-object-acl / get-bucket-acl (the grants as [type, grantee, permission]),
// anon-get (GetObject from a client that signs nothing: an anonymous request).
// The result: {"ok": true, ...} or {"ok": false, "name": <S3 error code>, "status": <HTTP status>}.
const { Readable } = require("stream");
const crypto = require("crypto");
const {
	S3Client,
	PutObjectCommand,
	GetObjectCommand,
	HeadObjectCommand,
	CreateBucketCommand,
	PutObjectAclCommand,
	PutBucketAclCommand,
	GetObjectAclCommand,
	GetBucketAclCommand,
} = require("@aws-sdk/client-s3");

function pattern(size, seed) {
	const out = Buffer.alloc(size);
	let x = seed >>> 0 || 1;
	for (let i = 0; i < size; i++) {
		x ^= x << 13;
		x ^= x >>> 17;
		x ^= x << 5;
		out[i] = x & 0xff;
	}
	return out;
}

function md5(b) {
	return crypto.createHash("md5").update(b).digest("hex");
}

// The grants of a Get*Acl answer as [type, grantee (URI or ID), permission], sorted.
function grants(r) {
	return (r.Grants || [])
		.map((g) => [g.Grantee.Type, g.Grantee.URI || g.Grantee.ID, g.Permission])
		.sort();
}

async function main() {
	const op = process.argv[2];
	const a = JSON.parse(process.argv[3]);
	const client = new S3Client({
		endpoint: a.endpoint,
		region: "us-east-1",
		forcePathStyle: true,
		credentials: { accessKeyId: a.access, secretAccessKey: a.secret },
		maxAttempts: 1,
	});
	const data = pattern(a.size || 0, a.seed || 1);
	const base = { Bucket: a.bucket, Key: a.key };
	const seen = {};
	client.middlewareStack.add(
		(next) => async (args) => {
			const h = args.request.headers || {};
			seen.content_sha256 = h["x-amz-content-sha256"];
			seen.trailer = h["x-amz-trailer"];
			return next(args);
		},
		{ step: "finalizeRequest", name: "ftSeeHeaders", priority: "low" }
	);
	let r;
	switch (op) {
	case "put-stream":
		r = await client.send(
			new PutObjectCommand({ ...base, Body: Readable.from([data.subarray(0, data.length >> 1),
										  data.subarray(data.length >> 1)]),
					       ContentLength: data.length }));
		return { ok: true, etag: r.ETag, md5: md5(data), seen };
	case "put-bytes":
		r = await client.send(new PutObjectCommand({ ...base, Body: data }));
		return { ok: true, etag: r.ETag, md5: md5(data), seen };
	case "put-if-none-match":
		r = await client.send(new PutObjectCommand({ ...base, Body: data, IfNoneMatch: "*" }));
		return { ok: true, etag: r.ETag, md5: md5(data), seen };
	case "put-checksum":
		r = await client.send(new PutObjectCommand({ ...base, Body: data, ChecksumCRC32: a.crc32 }));
		return { ok: true, etag: r.ETag, seen };
	case "get": {
		r = await client.send(new GetObjectCommand(base));
		const body = Buffer.from(await r.Body.transformToByteArray());
		// the SDK validated the body against a full-object checksum it was sent (it throws otherwise)
		return { ok: true, size: body.length, md5: md5(body), etag: r.ETag, seen, crc32: r.ChecksumCRC32,
			 checksum_type: r.ChecksumType };
	}
	case "upload": {
		const { Upload } = require("@aws-sdk/lib-storage");
		const params = { ...base, Body: Readable.from([data]) };
		if (a.checksum)
			params.ChecksumAlgorithm = a.checksum;
		if (a.checksum_type)
			params.ChecksumType = a.checksum_type;
		const up = new Upload({ client, params });
		r = await up.done();
		return { ok: true, etag: r.ETag, md5: md5(data), crc32: r.ChecksumCRC32 };
	}
	case "presign-get":
	case "presign-put": {
		const { getSignedUrl } = require("@aws-sdk/s3-request-presigner");
		const put = op === "presign-put";
		const cmd = put ? new PutObjectCommand(base) : new GetObjectCommand(base);
		const url = await getSignedUrl(client, cmd, { expiresIn: a.expires || 600 });
		const res = await fetch(url, put ? { method: "PUT", body: data } : {});
		const body = Buffer.from(await res.arrayBuffer());
		return { ok: res.status === 200, status: res.status, md5: md5(put ? data : body), size: body.length,
			 url, text: res.status === 200 ? "" : body.toString() };
	}
	case "put-meta":
		r = await client.send(new PutObjectCommand({ ...base, Body: data, Metadata: a.meta }));
		return { ok: true, etag: r.ETag };
	case "get-meta":
		r = await client.send(new HeadObjectCommand(base));
		return { ok: true, meta: r.Metadata };
	case "create-bucket":
		r = await client.send(new CreateBucketCommand({ Bucket: a.bucket, ...(a.acl ? { ACL: a.acl } : {}) }));
		return { ok: true, status: r.$metadata.httpStatusCode };
	case "put-acl":
		r = await client.send(new PutObjectCommand({ ...base, Body: data, ACL: a.acl }));
		return { ok: true, etag: r.ETag, md5: md5(data) };
	case "put-object-acl":
		r = await client.send(new PutObjectAclCommand({ ...base, ACL: a.acl }));
		return { ok: true, status: r.$metadata.httpStatusCode };
	case "put-bucket-acl":
		r = await client.send(new PutBucketAclCommand({ Bucket: a.bucket, ACL: a.acl }));
		return { ok: true, status: r.$metadata.httpStatusCode };
	case "get-object-acl":
		r = await client.send(new GetObjectAclCommand(base));
		return { ok: true, owner: r.Owner && r.Owner.ID, grants: grants(r) };
	case "get-bucket-acl":
		r = await client.send(new GetBucketAclCommand({ Bucket: a.bucket }));
		return { ok: true, owner: r.Owner && r.Owner.ID, grants: grants(r) };
	case "anon-get": {
		// no credentials and a signer that leaves the request as it is: nothing identifies the caller
		const anon = new S3Client({
			endpoint: a.endpoint,
			region: "us-east-1",
			forcePathStyle: true,
			maxAttempts: 1,
			credentials: { accessKeyId: "", secretAccessKey: "" },
			signer: { sign: async (request) => request },
		});
		const sent = {};
		anon.middlewareStack.add(
			(next) => async (args) => {
				sent.authorization = (args.request.headers || {}).authorization || null;
				return next(args);
			},
			{ step: "finalizeRequest", name: "ftSeeAuth", priority: "low" }
		);
		try {
			r = await anon.send(new GetObjectCommand(base));
		} catch (e) {
			e.sent = sent;
			throw e;
		}
		const body = Buffer.from(await r.Body.transformToByteArray());
		return { ok: true, size: body.length, md5: md5(body), sent };
	}
	default:
		throw new Error("unknown op " + op);
	}
}

main().then(
	(r) => {
		process.stdout.write(JSON.stringify(r) + "\n");
	},
	(e) => {
		const status = e.$metadata ? e.$metadata.httpStatusCode : undefined;
		process.stdout.write(
			JSON.stringify({ ok: false, name: e.name || e.Code, status, message: e.message, sent: e.sent }) + "\n"
		);
	}
);
