// Package swim is discovery by gossip for wizard nodes: they find each
// other, learn who serves which pattern and forget a dead node quickly,
// without a central registry. It runs SWIM membership on
// hashicorp/memberlist.
//
// # Use
//
// A [Discovery] is a discovery.Discovery; hand a new one to each node:
//
//	d, err := swim.New(
//		swim.WithBindAddr("0.0.0.0:7946"),
//		swim.WithDNSSeeds("_gossip._udp.wizard.default.svc.cluster.local"),
//		swim.WithKeys(key),
//		swim.WithLogger(logger),
//	)
//	if err != nil {
//		return err // an invalid option, named: "wizard: swim: WithKeys: the primary key is 5 bytes; ..."
//	}
//	n, err := runtime.New(
//		runtime.WithTransport(tr), // tr, err := tcp.New(tcp.WithServerTLS(srv), tcp.WithClientTLS(cli))
//		runtime.WithListen(":7000"),
//		runtime.WithDiscovery(d),
//	)
//
// [New] checks every option; what it cannot know (the gossip port is
// free, the configuration [WithMemberlistConfig] leaves works, gossip
// without keys binds to loopback or has [WithInsecure]) fails
// [Discovery.Start], so runtime.New. The node starts the Discovery when it
// is created and closes it when it shuts down; closing leaves the
// cluster, so the other members drop the node at once instead of
// detecting its failure.
//
// Every member gossips a small, fixed-size record about itself (memberlist
// limits it to 512 bytes): the wizard protocol version, the address and
// name of its transport, its segment and a digest of its pattern set.
// When a member joins, or its digest changes (the node calls
// [Discovery.SelfChanged] after every Add and Remove), the other nodes
// pull its pattern catalog from it over the wizard transport, in full once
// per digest (a member whose digest a node has cached answers the digest
// alone), and route its patterns then. What a member gossips only says
// where to dial it: a member is routed what it answers itself on its own
// connection, under the id it answers with, and one whose address never
// answers is dialled ever more slowly and given up after a few minutes
// (see discovery.Host). A member that leaves, or that memberlist
// declares dead, leaves routing on every node at once; a suspect member
// (it missed probes and has not refuted the suspicion yet) is reported as
// such and gets no new calls while others serve its patterns.
//
// Memberlist names each member by its node id and the run (instance) of
// the node, so a node restarted under the same id, on a new address or its
// old one, is a new member: it is accepted at once, and the death of its
// previous run, when the others notice it, does not take it out of
// routing.
//
// # Seeds
//
// A new node joins through seeds, the gossip addresses of a few members:
// a static list ([WithSeeds]), DNS names ([WithDNSSeeds]: A and AAAA
// records, or SRV records such as a Kubernetes headless service publishes
// for a named port), or a function ([WithSeedFunc]). Seeds resolve again
// on every attempt, and joining retries in the background with jittered
// exponential backoff until one answers, another member joins this node,
// or the node closes; once one answers, the node also joins up to three
// of the seeds that did not become members with it (the seed may be a
// node as new as this one, alone so far, as a headless service lists the
// pods of a scale-up before they have joined). A node without seeds, or whose seeds name only
// itself, is the first of its cluster and waits for others to join it.
// Once in a cluster, a node resolves its seeds again every re-join
// interval and joins those that are not live members (a seed cut off by
// a partition, a new address behind a DNS name); a node left alone backs
// off as at first.
//
// # Partitions
//
// memberlist gossips to a member it declared dead for GossipToTheDeadTime
// only (30 s with [LAN], 3 s with [Fast]) and then forgets it, so the
// sides of a longer partition would never hear of each other again. As
// Serf does, each node therefore keeps the members that failed (declared
// dead, not those that left) and, every reconnect interval (jittered),
// joins up to three of them again, at random, until one is a member
// again, another member has its address, or the reconnect timeout after
// its death passes; an address that keeps failing is tried ever less
// often, up to three intervals apart, and logged at Warn once. One join
// across the healed partition merges both sides: it exchanges every
// member each side knows, and gossip spreads them. [LAN] reconnects every
// 10 s for 24 h and re-joins seeds every 30 s; [Fast] every second for 10
// minutes, seeds every 3 s. [WithReconnect] changes them, or turns both
// off. At most 512 failed members are kept, the most recent deaths.
//
// # Presets
//
// [LAN] (the default) keeps memberlist's LAN timings: failures are
// detected in a few seconds and gossip costs little. [Fast] is for tests
// and for nodes sharing one host: probes every 100 ms and a suspicion
// timeout of 4 × max(1, log10 n) × 100 ms for n members (see
// [Preset.SuspicionTimeout]). [WithMemberlistConfig] changes anything
// else in memberlist's configuration.
//
// # Segments
//
// [WithSegment] splits a fleet into groups that never see each other:
// the segment goes out as memberlist's label on every packet and stream,
// and members drop what carries another label, seeds of the other segment
// included.
//
// # Keys
//
// [WithKeys] encrypts and authenticates gossip with AES-GCM. A node
// without a key the cluster uses cannot join it or tell its members about
// any member; they drop its packets and log them. [Discovery.InstallKey],
// [Discovery.UseKey] and [Discovery.RemoveKey] rotate keys at run time,
// one step at a time across the cluster. Gossip carries membership only:
// calls between nodes go over the wizard transport, which has its own TLS.
//
// Without keys, anyone who can reach the gossip port can join the
// cluster, read who serves what and announce members, which every node
// then dials and routes calls to. So unencrypted gossip runs only on a
// loopback address (127.0.0.1, ::1) unless [WithInsecure] says otherwise:
// on any other address, the default "0.0.0.0:7946" included,
// [Discovery.Start] fails without WithKeys or WithInsecure, as gRPC wants
// insecure credentials spelled out. The keys make every member a holder
// of the cluster's secret: they authenticate membership, not each node;
// a member that has the key is believed about where to dial. What a
// member serves, and who it is, its own connection says: a node routes a
// member only when the catalog pulled over that connection states the id
// it was announced under (the same run, or a new run of it not yet
// announced elsewhere). A member that announces another node's digest at
// its own address and relays that node's catalog is not routed.
//
// Anyone who reaches the port can also send noise, which memberlist
// reports: its warnings and errors are rate-limited, at most 10 every 10
// seconds and then one record that counts the others ("... N more
// suppressed"), and name the sender in a remote attribute.
//
// # Network
//
// Each node needs one gossip port open for both UDP (probes and gossip)
// and TCP (joins and periodic full state syncs) between all members,
// 7946 by default, besides its transport's port. When a node binds to all
// interfaces, it advertises one of its private addresses; behind NAT or in
// containers, set the address others reach it at with
// [WithAdvertiseAddr]. A transport listening on all interfaces
// ("0.0.0.0:7000") is announced at the advertised gossip IP.
package swim
