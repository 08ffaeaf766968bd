package server

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// strictJSON is Connect's JSON codec, except that it refuses what a request names and the
// API does not have: an unknown field ("hostNetwork") or enum value ("RUNTIME_KIND_BOGUS")
// is the caller's mistake, and the answer names it, where Connect's own codec drops it and
// runs the call without it.
type strictJSON struct{ name string }

// jsonCodecs replace Connect's, under both of its names.
var jsonCodecs = []strictJSON{{"json"}, {"json; charset=utf-8"}}

func (c strictJSON) Name() string { return c.name }

func (strictJSON) Marshal(message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", message)
	}
	return protojson.MarshalOptions{}.Marshal(m)
}

func (strictJSON) Unmarshal(data []byte, message any) error {
	m, ok := message.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", message)
	}
	if len(data) == 0 {
		return errors.New("zero-length payload is not a valid JSON object")
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(data, m); err != nil {
		return fmt.Errorf("the request is not a %s: %w (the API's fields and values are in api/proto)", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}
