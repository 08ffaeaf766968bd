// The Kiln API's generated messages, enums and service descriptors (package kiln.v1).
export * from "./gen/kiln/v1/queue_pb.js";
export * from "./gen/kiln/v1/runtime_pb.js";
export * from "./gen/kiln/v1/crontrainjob_pb.js";
export * from "./gen/kiln/v1/server_pb.js";
export * from "./gen/kiln/v1/trainjob_pb.js";
