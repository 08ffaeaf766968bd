package images

import (
	"fmt"
	"os"
)

// BaseLayer is the minimal base every Kiln image starts from: root and nonroot (65532) in
// /etc/passwd and /etc/group, the CA certificates of Debian's ca-certificates (read from
// caFile, /etc/ssl/certs/ca-certificates.crt on Debian), and a world-writable /tmp.
func BaseLayer(caFile string) ([]File, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the CA certificates (Debian's ca-certificates): %w", err)
	}
	return []File{
		{Path: "etc/passwd", Mode: 0o644, Data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot)},
		{Path: "etc/group", Mode: 0o644, Data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", NonRoot)},
		{Path: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: ca},
		{Path: "home/nonroot/", Mode: 0o755},
		{Path: "root/", Mode: 0o700},
		{Path: "tmp/", Mode: 0o1777},
	}, nil
}

// BaseEnv is the environment of every image built on the base layer.
var BaseEnv = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
}
