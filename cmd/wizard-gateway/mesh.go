package main

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/internal/transportname"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/swim"
)

// applyMeshFlags lays the command line's mesh settings over the file's.
func applyMeshFlags(m *config.Mesh, f *flags) {
	if f.transport != "" {
		m.Transport = f.transport
	}
	if f.listenMesh != "" {
		m.Listen = f.listenMesh
	}
	if f.gossip != "" {
		m.GossipListen = f.gossip
	}
	if f.advertise != "" {
		m.GossipAdvertise = f.advertise
	}
	if f.seeds != "" {
		m.Seeds = splitList(f.seeds)
	}
	if f.peers != "" {
		m.Peers = splitList(f.peers)
	}
	if f.gossipKey != "" {
		m.GossipKey, m.GossipKeyFile = f.gossipKey, ""
	}
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// nodeOptions are the options of the gateway's node: its transport,
// listen address and discovery (static peers, or gossip with seeds or
// DNS; none: a node that knows no peers until one calls it).
func nodeOptions(m config.Mesh, log *slog.Logger) ([]runtime.Option, error) {
	t, err := transportOf(m, log)
	if err != nil {
		return nil, err
	}
	// WithPeerTypes: the services' protobuf answers become JSON without
	// their types linked into this binary (learnt from each service's
	// schema).
	opts := []runtime.Option{runtime.WithTransport(t), runtime.WithListen(m.Listen), runtime.WithLogger(log), runtime.WithPeerTypes()}
	switch {
	case len(m.Peers) > 0:
		opts = append(opts, runtime.WithDiscovery(runtime.StaticPeers(m.Peers...)))
	case len(m.Seeds) > 0 || len(m.DNS) > 0:
		d, err := gossipOf(m, log)
		if err != nil {
			return nil, err
		}
		opts = append(opts, runtime.WithDiscovery(d))
	}
	return opts, nil
}

func transportOf(m config.Mesh, log *slog.Logger) (runtime.Transport, error) {
	var server, client *tls.Config
	if m.TLS != nil {
		var err error
		if server, client, err = meshTLS(m.TLS); err != nil {
			return nil, fmt.Errorf("mesh.tls: %w", err)
		}
	}
	name := cmp.Or(m.Transport, "tcp")
	if err := transportname.Check(name); err != nil {
		return nil, fmt.Errorf("mesh.transport: %w", err)
	}
	if name == "quic" && server == nil && !m.Insecure {
		return nil, errors.New("mesh.transport quic needs mesh.tls (or mesh.insecure: a throwaway self-signed certificate, unverified)")
	}
	return transportname.New(name, transportname.Config{Logger: log, ServerTLS: server, ClientTLS: client, Insecure: m.Insecure, SelfSigned: m.Insecure})
}

// meshTLS is mutual TLS with the mesh's CA: the gateway's certificate
// for both sides, peers verified against the CA (and, when set, against
// server_name instead of the host dialled).
func meshTLS(t *config.TLS) (server, client *tls.Config, err error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, nil, err
	}
	if !pool.AppendCertsFromPEM(ca) {
		return nil, nil, fmt.Errorf("%s holds no PEM certificate", t.CAFile)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: t.ServerName, MinVersion: tls.VersionTLS13}
	return server, client, nil
}

func gossipOf(m config.Mesh, log *slog.Logger) (*swim.Discovery, error) {
	opts := []swim.Option{swim.WithLogger(log), swim.WithPreset(swim.LAN)}
	if m.GossipListen != "" {
		opts = append(opts, swim.WithBindAddr(m.GossipListen))
	}
	if m.GossipAdvertise != "" {
		opts = append(opts, swim.WithAdvertiseAddr(m.GossipAdvertise))
	}
	if len(m.Seeds) > 0 {
		opts = append(opts, swim.WithSeeds(m.Seeds...))
	}
	if len(m.DNS) > 0 {
		opts = append(opts, swim.WithDNSSeeds(m.DNS...))
	}
	if m.Segment != "" {
		opts = append(opts, swim.WithSegment(m.Segment))
	}
	key, err := gossipKey(m)
	if err != nil {
		return nil, err
	}
	switch {
	case key != nil:
		opts = append(opts, swim.WithKeys(key))
	case m.Insecure:
		opts = append(opts, swim.WithInsecure())
	}
	return swim.New(opts...)
}

func gossipKey(m config.Mesh) ([]byte, error) {
	text := m.GossipKey
	if m.GossipKeyFile != "" {
		b, err := os.ReadFile(m.GossipKeyFile)
		if err != nil {
			return nil, fmt.Errorf("mesh.gossip_key_file: %w", err)
		}
		text = strings.TrimSpace(string(b))
	}
	if text == "" {
		return nil, nil
	}
	key, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("the gossip key is not base64: %w", err)
	}
	return key, nil
}
