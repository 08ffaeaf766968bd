"""Generated from Kiln's API definitions (api/proto) by protoc-gen-kiln-python. DO NOT EDIT."""
