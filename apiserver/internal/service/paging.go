package service

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// pageToken is what a next_page_token encodes: the query it continues, and the last
// "<namespace>/<name>" returned.
type pageToken struct {
	Query string `json:"q"`
	After string `json:"a"`
}

// pageQuery identifies a list query, so a token is never used with another one.
func pageQuery(m *kilnv1.ListTrainJobsRequest) string {
	c := proto.CloneOf(m)
	c.PageToken, c.PageSize = "", 0
	data, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

func encodePageToken(query, after string) string {
	data, _ := json.Marshal(pageToken{Query: query, After: after})
	return base64.RawURLEncoding.EncodeToString(data)
}

func decodePageToken(token, query string) (string, field.ErrorList) {
	if token == "" {
		return "", nil
	}
	p := field.NewPath("page_token")
	data, err := base64.RawURLEncoding.DecodeString(token)
	t := pageToken{}
	if err != nil || json.Unmarshal(data, &t) != nil || t.After == "" {
		return "", field.ErrorList{field.Invalid(p, token, "not a token this server issued: pass a previous response's next_page_token unchanged")}
	}
	if t.Query != query {
		return "", field.ErrorList{field.Invalid(p, token, "belongs to a different query: keep namespace, label_selector and states as they were, or start again without a token")}
	}
	return t.After, nil
}
