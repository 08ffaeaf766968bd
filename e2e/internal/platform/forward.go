package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Forward accepts TCP connections on listen and relays each to to, byte for byte (TLS
// passes through), until ctx ends. The real node's pods reach the apiserver this way: its
// `kubernetes` Service points at NodeIP, while the apiserver listens on 127.0.0.1 only.
func Forward(ctx context.Context, listen, to string) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", listen, err)
	}
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	for {
		in, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accepting on %s: %w", listen, err)
		}
		go relay(ctx, in, to)
	}
}

func relay(ctx context.Context, in net.Conn, to string) {
	defer in.Close()
	var d net.Dialer
	out, err := d.DialContext(ctx, "tcp", to)
	if err != nil {
		return
	}
	defer out.Close()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err != nil && !errors.Is(err, net.ErrClosed) {
			_ = dst.Close()
			return
		}
		// Pass the half-close on, so that the other side sees the end of the stream.
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
	}
	wg.Add(2)
	go pipe(out, in)
	go pipe(in, out)
	wg.Wait()
}
