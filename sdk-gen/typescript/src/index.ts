// @kiln-ml/sdk: submit, follow and control Kiln training jobs from TypeScript (Node.js 20+).
//
//   import { TrainerClient } from "@kiln-ml/sdk";
//   const client = new TrainerClient(); // the Kiln configuration, as the kiln CLI reads it
//   const name = await client.train({ runtime: "torch-distributed", trainer: { command: ["torchrun", "train.py"], numNodes: 2 } });
//   await client.waitForJobStatus(name, "Complete");

// Clients read the Kiln configuration (./node.js); @kiln-ml/sdk/browser is the same without.
import "./node.js";

export * from "./client.js";
export * from "./errors.js";
export { defaultPath, resolve as resolveConfig, type Context } from "./config.js";
/** The API's generated messages, enums and service descriptors (package kiln.v1). */
export * as v1 from "./v1.js";
