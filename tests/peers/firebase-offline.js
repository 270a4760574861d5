// Preload (node --require, via NODE_OPTIONS) that lets the firebase-tools storage emulator start offline.
//
// The emulator as shipped insists on Java 21 and downloads a storage-rules runtime jar at start.
// The GCS JSON API routes the tests use never consult rules (they go through the admin storage
// layer), so this replaces the Java version check and the rules runtime and manager with no-ops.
// The result is the emulator with its rules engine switched off: fine for the JSON API, not for
// the Firebase client API, whose requests are checked against rules.
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
