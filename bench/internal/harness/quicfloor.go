package harness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// quicFloorName is the QUIC floor: the floor's wire over one quic-go
// stream, what QUIC itself costs beneath wizard QUIC.
const quicFloorName = "floor-quic"

// quicFloorALPN is the floor's ALPN on QUIC (TLS 1.3 needs one).
const quicFloorALPN = "wizard-bench-floor"

var quicFloorContender = Contender{
	Name:  quicFloorName,
	Title: "QUIC floor (quic-go alone)",
	Note: "written in the harness: the raw TCP floor's frames, client and inline server over one bidirectional stream of one quic-go connection " +
		"(TLS 1.3 with a self-signed ECDSA P-256 certificate on loopback, the stream and connection windows wizard QUIC sets): QUIC's own floor, " +
		"beneath wizard QUIC's four streams, mux, codec and routing",
	Serve: serveQUICFloor,
	Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		tc := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{quicFloorALPN}, MinVersion: tls.VersionTLS13}
		qc, err := quic.DialAddr(ctx, addr, tc, quicFloorConfig())
		if err != nil {
			return nil, err
		}
		st, err := qc.OpenStreamSync(ctx)
		if err != nil {
			qc.CloseWithError(0, "")
			return nil, err
		}
		return newFloorClient(quicStreamConn{st, qc}), nil
	},
}

// quicFloorConfig is quic-go's configuration on both sides: wizard QUIC's
// receive windows (runtime/quic: 1 MiB a stream, 2 MiB a connection).
func quicFloorConfig() *quic.Config {
	return &quic.Config{MaxStreamReceiveWindow: 1 << 20, MaxConnectionReceiveWindow: 2 << 20, MaxIncomingUniStreams: -1}
}

// quicStreamConn is a QUIC stream as the net.Conn the floor's client and
// server use; closing it closes its connection.
type quicStreamConn struct {
	*quic.Stream
	c *quic.Conn
}

func (q quicStreamConn) LocalAddr() net.Addr  { return q.c.LocalAddr() }
func (q quicStreamConn) RemoteAddr() net.Addr { return q.c.RemoteAddr() }
func (q quicStreamConn) Close() error         { return q.c.CloseWithError(0, "") }

type quicFloorServer struct {
	l    *quic.Listener
	f    floorServer // serve and serveConcurrent, on each connection's stream
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func serveQUICFloor(listen string, h Handler, o ServeOptions) (Server, error) {
	cert, err := quicFloorCert()
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{quicFloorALPN}, MinVersion: tls.VersionTLS13}
	l, err := quic.ListenAddr(listen, tc, quicFloorConfig())
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &quicFloorServer{l: l, f: floorServer{h: h, blocking: o.Blocking}, stop: stop}
	s.wg.Go(func() { s.accept(ctx) })
	return s, nil
}

func (s *quicFloorServer) Addr() string { return s.l.Addr().String() }

func (s *quicFloorServer) Close() error {
	s.stop()
	err := s.l.Close()
	s.wg.Wait()
	return err
}

func (s *quicFloorServer) accept(ctx context.Context) {
	for {
		qc, err := s.l.Accept(ctx)
		if err != nil {
			return
		}
		s.wg.Go(func() {
			defer qc.CloseWithError(0, "")
			go func() { // a connection ends with the server
				select {
				case <-ctx.Done():
					qc.CloseWithError(0, "")
				case <-qc.Context().Done():
				}
			}()
			st, err := qc.AcceptStream(ctx)
			if err != nil {
				return
			}
			nc := quicStreamConn{st, qc}
			if s.f.blocking {
				s.f.serveConcurrent(nc)
			} else {
				s.f.serve(nc)
			}
		})
	}
}

// quicFloorCert makes a self-signed ECDSA P-256 certificate for 127.0.0.1
// and localhost, valid for a day.
func quicFloorCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "wizard bench floor"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
