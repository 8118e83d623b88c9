// Package network is brim's network isolator: for each container that asks
// for networking it creates a network namespace (a bind-mounted nsfs file the
// container joins), a veth pair whose host side is a port of a host bridge
// (default brim0), an IPv4 address from a configured subnet (IPAM records in
// the agent's state dir, so an address is never handed out twice, also
// across agent restarts), loopback, and a default route via the bridge.
//
// Bandwidth is shaped with HTB on two host-wide IFB devices next to the
// bridge, <bridge>-tx (container egress, redirected from the ingress hook of
// the host-side veth) and <bridge>-rx (container ingress, redirected from its
// egress hook). Every container has one HTB class on each, under a parent
// class whose rate is the host's uplink rate (Config.HostRateMbit). A
// guaranteed container's class has rate = ceil = its limit; a best-effort
// (revocable) container's class has a minimal rate, ceil = its limit or the
// uplink, and the lowest priority, so it borrows whatever the guaranteed
// classes leave idle and yields it as soon as they want it back. Limits
// change live (one netlink class change per direction). Each class's leaf
// queue is a bfifo holding 50 ms of its ceiling, so a download at the
// limit does not queue a second of delay in front of everything else.
//
// Release gives back an exited container's address, veth, namespace and
// classes at its exit (the containerizer calls it), so exited containers
// kept for inspection do not exhaust the subnet.
//
// To keep namespace creation off the launch path, the isolator keeps a few
// spare namespaces with their veth pair made ahead (Config.Spares), held by
// open files only, so they vanish with the process; one goroutine refills
// them after a launch takes one, owned by the Isolator and stopped by Close
// or Uninstall.
//
// The package owns: the bridge, the two IFB devices, Config.NetNSDir (a
// shared mount point bound on itself, like /run/netns) and the netns files
// under it, the veths whose names start with its bridge's prefix, its
// HTB classes and filters, and the IPAM records under Config.StateDir. It
// never decides policy (limits come from the caller), never logs, and never
// touches links, namespaces or qdiscs it did not create. It owns the
// nftables table "ip brim-<bridge>", replaced as a whole in one
// transaction at New, Recover and whenever a port mapping comes or goes,
// and never touches another table: containers reach the host only on
// Config.HostAllow (TCP reset, ICMP admin-prohibited otherwise); the port
// mappings (isolator.Limits.Ports, kept in the IPAM record) are DNAT rules
// with a hairpin masquerade; with Config.Isolate the containers' bridge
// ports are isolated (IFLA_BRPORT_ISOLATED) and routed traffic between
// them is dropped; with Config.NAT the subnet is masqueraded and IPv4
// forwarding turned on (its previous value recorded in the state dir and
// put back by Close with no container left, Uninstall and Teardown). A
// mapping's host port must be in Config.PortRange and free on the host:
// the isolator binds it before the rules exist and holds the socket until
// the mapping goes, so no host process is silently shadowed by a rule.
// Teardown removes everything an isolator made, with none running (`brim
// agent cleanup`).
//
// Sentinels: isolator.ErrNotFound (unknown container), ErrExist (Prepare of a
// container already prepared), ErrExhausted (no free address in the subnet),
// isolator.ErrNotSupported (not Linux), ErrInvalid (a bad Config or
// container ID, a bad port mapping with isolator.ErrBadPort; Isolate of a
// process outside the container's namespace), isolator.ErrPortInUse (a
// host port mapped to another container or held by a host process),
// ErrLocked (another Isolator holds the state dir, from New and Teardown:
// one Isolator per bridge and state dir).
package network
