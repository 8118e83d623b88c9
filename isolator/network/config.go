package network

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/brimnode/brim/isolator"
)

var (
	// ErrExist is returned by Prepare for a container that is already
	// prepared (Cleanup it first).
	ErrExist = errors.New("container network already prepared")
	// ErrExhausted is returned by Prepare when the subnet has no free address.
	ErrExhausted = errors.New("no free address in subnet")
	// ErrInvalid is returned for a bad Config or container ID.
	ErrInvalid = errors.New("invalid argument")
	// ErrLocked is returned by New when another Isolator (in this or
	// another process) holds the state dir.
	ErrLocked = errors.New("network state dir in use")
)

// Defaults for the zero fields of Config.
const (
	DefaultBridge   = "brim0"
	DefaultStateDir = "/var/lib/brim/agent/network"
	// DefaultNetNSDir is the parent of the default netns dir,
	// DefaultNetNSDir/<bridge>: the isolator of a bridge owns its directory.
	DefaultNetNSDir     = "/run/brim/netns"
	DefaultHostRateMbit = 10000
	DefaultSpares       = 2
)

// DefaultSubnet is the container subnet when Config.Subnet is unset: a /16
// (65533 containers) in the private range that Docker and Podman leave alone
// (they use 172.17/16 and 10.88/16).
var DefaultSubnet = netip.MustParsePrefix("10.77.0.0/16")

// maxBridgeName leaves room for the IFB suffixes ("-tx", "-rx") within the
// kernel's 15-byte interface names.
const maxBridgeName = 12

// Config configures an Isolator. The zero value of every field means its
// default.
type Config struct {
	// Bridge is the host bridge containers attach to (created when missing,
	// at most 12 bytes). Default brim0.
	Bridge string
	// Subnet is the IPv4 container subnet; the bridge takes its first
	// address (the containers' gateway). Prefix length 16 to 30.
	Subnet netip.Prefix
	// StateDir holds the IPAM records (one file per container) and a lock:
	// one Isolator at a time per state dir. Default DefaultStateDir.
	StateDir string
	// NetNSDir holds the containers' netns files (bind mounts of nsfs),
	// named by container ID. The isolator owns it: Recover removes any file
	// there it has no record of. Default DefaultNetNSDir/<Bridge>.
	NetNSDir string
	// HostRateMbit is the uplink rate shared by all containers: the ceiling
	// of best-effort classes and the parent rate that guaranteed classes
	// take precedence on.
	HostRateMbit int64
	// Spares is how many namespaces with their veth pair the isolator keeps
	// made ahead of launches (they take ~2 ms of a Prepare's ~3.5 ms); it
	// makes them in New, Cleanup and Recover. Default DefaultSpares; a
	// negative value keeps none.
	Spares int
	// NAT masquerades what containers send to anything but the bridge
	// (an nftables table "brim-<bridge>") and turns on IPv4 forwarding in
	// the host namespace. Off by default.
	NAT bool
	// HostAllow lists the host ports containers may reach on the host's
	// addresses (e.g. 53/udp for a resolver on the bridge address).
	// Everything else a container sends to the host is rejected (an
	// nftables table "brim-<bridge>", always installed). Default: nothing.
	HostAllow []HostPort
	// Isolate keeps containers from reaching each other: their bridge
	// ports are isolated (IFLA_BRPORT_ISOLATED) and traffic routed between
	// two containers is dropped, except through a port mapping.
	Isolate bool
	// PortRange is the host ports port mappings may use; a mapping of a
	// port outside it is refused. Default isolator.DefaultPortRange.
	PortRange isolator.PortRange
}

// HostPort is a port of the host that containers may reach (Config.HostAllow).
type HostPort struct {
	Port     uint16
	Protocol string // isolator.TCP or isolator.UDP
}

func (h HostPort) String() string { return fmt.Sprintf("%d/%s", h.Port, h.Protocol) }

// ParseHostPort parses PORT[/tcp|/udp] (tcp when no protocol is given).
// Errors wrap ErrInvalid.
func ParseHostPort(s string) (HostPort, error) {
	num, proto, ok := strings.Cut(s, "/")
	if !ok {
		proto = isolator.TCP
	}
	n, err := strconv.ParseUint(num, 10, 64)
	switch {
	case proto != isolator.TCP && proto != isolator.UDP:
		return HostPort{}, fmt.Errorf("host port %q: protocol %q: want tcp or udp: %w", s, proto, ErrInvalid)
	case err != nil:
		return HostPort{}, fmt.Errorf("host port %q: want PORT[/tcp|/udp]: %w", s, ErrInvalid)
	case n < 1 || n > 65535:
		return HostPort{}, fmt.Errorf("host port %q: %d is out of range 1-65535: %w", s, n, ErrInvalid)
	}
	return HostPort{Port: uint16(n), Protocol: proto}, nil
}

// withDefaults returns c with defaults filled in, or an error wrapping
// ErrInvalid.
func (c Config) withDefaults() (Config, error) {
	if c.Bridge == "" {
		c.Bridge = DefaultBridge
	}
	if !c.Subnet.IsValid() {
		c.Subnet = DefaultSubnet
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.NetNSDir == "" {
		c.NetNSDir = filepath.Join(DefaultNetNSDir, c.Bridge)
	}
	if c.HostRateMbit == 0 {
		c.HostRateMbit = DefaultHostRateMbit
	}
	if c.Spares == 0 {
		c.Spares = DefaultSpares
	}
	if c.PortRange.IsZero() {
		c.PortRange = isolator.DefaultPortRange
	}
	c.Subnet = c.Subnet.Masked()
	switch {
	case len(c.Bridge) > maxBridgeName || strings.ContainsAny(c.Bridge, "/ \t\n:"):
		return c, fmt.Errorf("bridge name %q (at most %d bytes, no '/', ':' or space): %w", c.Bridge, maxBridgeName, ErrInvalid)
	case !c.Subnet.Addr().Is4():
		return c, fmt.Errorf("subnet %s: only IPv4: %w", c.Subnet, ErrInvalid)
	case c.Subnet.Bits() < 16 || c.Subnet.Bits() > 30:
		return c, fmt.Errorf("subnet %s: prefix length must be 16 to 30: %w", c.Subnet, ErrInvalid)
	case !filepath.IsAbs(c.StateDir) || !filepath.IsAbs(c.NetNSDir):
		return c, fmt.Errorf("state dir %q and netns dir %q must be absolute: %w", c.StateDir, c.NetNSDir, ErrInvalid)
	case c.HostRateMbit < 0:
		return c, fmt.Errorf("host rate %d Mbit/s: %w", c.HostRateMbit, ErrInvalid)
	case c.PortRange.First == 0 || c.PortRange.First > c.PortRange.Last:
		return c, fmt.Errorf("port range %s: want 1 <= START <= END: %w", c.PortRange, ErrInvalid)
	}
	seen := map[HostPort]bool{}
	for _, h := range c.HostAllow {
		if h.Port == 0 || (h.Protocol != isolator.TCP && h.Protocol != isolator.UDP) {
			return c, fmt.Errorf("allowed host port %s: want a port 1-65535 and tcp or udp: %w", h, ErrInvalid)
		}
		if seen[h] {
			return c, fmt.Errorf("allowed host port %s: listed twice: %w", h, ErrInvalid)
		}
		seen[h] = true
	}
	return c, nil
}

// checkID rejects container IDs that cannot name a file.
func checkID(id string) error {
	if id == "" || id == "." || id == ".." || len(id) > 200 || strings.ContainsAny(id, "/\x00") || strings.HasPrefix(id, ".") {
		return fmt.Errorf("container id %q: %w", id, ErrInvalid)
	}
	return nil
}
