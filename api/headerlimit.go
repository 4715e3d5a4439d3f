package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/jobbill/jobbill/apitype"
)

// MaxHeaderBytes bounds a request's header block — its request line and headers — in bytes (the
// HTTP server tolerates 4 KiB more); a larger one is answered 431 headers_too_large.
const MaxHeaderBytes = 16 << 10

// msgHeadersTooLarge is the sentence of a 431.
var msgHeadersTooLarge = fmt.Sprintf("The request's header block (its request line and headers) is over %d KiB; send fewer or shorter headers. Nothing was done.", MaxHeaderBytes>>10)

// serverHeadersTooLarge is the answer net/http's server writes itself, straight on the connection,
// when a header block is over its limit: the request is never read, so no handler, and none of
// what every answer of the API carries, sees it.
const serverHeadersTooLarge = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large"

// headerLimitListener hands the HTTP server connections that answer an over-limit header block as
// the API answers everything: each recognises the server's own 431, written in one piece, and
// writes the API's in its place. (If the server ever wrote other bytes, its own answer would pass
// unchanged; TestOversizeHeaderBlockAnswersInTheAPIShape would then fail.)
type headerLimitListener struct {
	net.Listener
	s *Server
}

// Accept wraps the next connection.
func (l headerLimitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &headerLimitConn{Conn: c, s: l.s}, nil
}

// headerLimitConn is one connection of a [headerLimitListener].
type headerLimitConn struct {
	net.Conn
	s *Server
}

// Write writes b, or, for the server's own 431, the API's.
func (c *headerLimitConn) Write(b []byte) (int, error) {
	if string(b) != serverHeadersTooLarge {
		return c.Conn.Write(b)
	}
	if _, err := c.Conn.Write(c.s.headersTooLarge()); err != nil {
		return 0, err
	}
	return len(b), nil
}

// CloseWrite half-closes the connection, as the server does after its 431 so that the client
// reads the answer before the connection is reset.
func (c *headerLimitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// headersTooLarge is the API's 431 as bytes on the wire: its error shape and headers, a new request
// ID (the request's own was never read), logged and counted like every answer — with no route,
// since none was read.
func (s *Server) headersTooLarge() []byte {
	start := time.Now()
	id := newRequestID()
	h := http.Header{}
	jsonHeaders(h)
	h.Set(RequestIDHeader, id)
	body, _ := json.Marshal(apitype.Error{Code: "headers_too_large", Message: msgHeadersTooLarge})
	body = append(body, '\n')
	resp := http.Response{StatusCode: http.StatusRequestHeaderFieldsTooLarge, ProtoMajor: 1, ProtoMinor: 1, Header: h,
		ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body)), Close: true}
	var out bytes.Buffer
	_ = resp.Write(&out) // into memory: never fails
	s.opts.Logger.Info("api request", zap.String("request_id", id), zap.String("route", ""),
		zap.Int("status", http.StatusRequestHeaderFieldsTooLarge), zap.String("key", ""), zap.Duration("took", time.Since(start)))
	if s.opts.Metrics != nil {
		s.opts.Metrics.HTTPRequest("", http.StatusRequestHeaderFieldsTooLarge, time.Since(start))
	}
	return out.Bytes()
}
