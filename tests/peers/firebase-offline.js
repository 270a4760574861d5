// Preload (node --require, via NODE_OPTIONS) that lets the firebase-tools storage emulator start offline.
//
// The emulator as shipped insists on Java 21 and downloads a storage-rules runtime jar at start.
// The GCS JSON API routes the tests use never consult rules (they go through the admin storage
// layer), so this replaces the Java version check and the rules runtime and manager with no-ops.
// The result is the emulator with its rules engine switched off: fine for the JSON API, not for
// the Firebase client API, whose requests are checked against rules. It also serves the emulator's
// bucket list at the JSON API's own path (GET /storage/v1/b), which the emulator routes only at /b.
"use strict";

const path = require("path");

const emulator = path.join(__dirname, "node_modules", "firebase-tools", "lib", "emulator");

const commandUtils = require(path.join(emulator, "commandUtils.js"));
commandUtils.checkJavaMajorVersion = async () => commandUtils.MIN_SUPPORTED_JAVA_MAJOR_VERSION;

const runtime = require(path.join(emulator, "storage", "rules", "runtime.js"));
runtime.StorageRulesRuntime.prototype.start = async function start() {};
runtime.StorageRulesRuntime.prototype.stop = async function stop() {};

const manager = require(path.join(emulator, "storage", "rules", "manager.js"));
manager.createStorageRulesManager = function createStorageRulesManager() {
  return {
    start: async () => [],
    stop: async () => {},
    getRuleset: () => undefined,
  };
};

// The emulator lists buckets at GET /b only; Google's JSON API (and the C backend) list them at
// GET /storage/v1/b?project=P. Route that path to the emulator's own /b handler, ahead of its
// catch-all "/:bucketId/:objectId" download route, which would otherwise answer it as an object.
const gcloud = require(path.join(emulator, "storage", "apis", "gcloud.js"));
const express = require(require.resolve("express", { paths: [emulator] }));
const createCloudEndpoints = gcloud.createCloudEndpoints;
gcloud.createCloudEndpoints = function createCloudEndpointsWithBucketList(storageEmulator) {
  const api = createCloudEndpoints(storageEmulator);
  const router = express.Router();
  router.get("/storage/v1/b", (req, res, next) => {
    req.url = "/b" + req.url.slice("/storage/v1/b".length);
    api(req, res, next);
  });
  router.use(api);
  return router;
};
