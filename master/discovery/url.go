package discovery

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ParseURL reads etcd://HOST:PORT[,HOST:PORT…]/PREFIX (a master's
// --store, a client's --master) into the endpoints and the key prefix
// (without a trailing slash). The prefix must be given: it keeps one
// cluster's keys apart from another's.
func ParseURL(s string) (endpoints []string, prefix string, err error) {
	rest, ok := strings.CutPrefix(s, "etcd://")
	if !ok {
		return nil, "", fmt.Errorf("--store %q: want etcd://HOST:2379[,HOST:2379…]/PREFIX", s)
	}
	hosts, path, ok := strings.Cut(rest, "/")
	path = strings.Trim(path, "/")
	if !ok || path == "" {
		return nil, "", fmt.Errorf("--store %q: no key prefix (etcd://HOST:2379/PREFIX, e.g. /brim)", s)
	}
	if strings.ContainsAny(path, "?#") {
		return nil, "", fmt.Errorf("--store %q: the prefix must be a plain path", s)
	}
	for _, h := range strings.Split(hosts, ",") {
		if _, port, err := net.SplitHostPort(h); err != nil || port == "" {
			return nil, "", fmt.Errorf("--store %q: endpoint %q is not HOST:PORT", s, h)
		}
		endpoints = append(endpoints, h)
	}
	return endpoints, "/" + path, nil
}

// EndpointURLs are the endpoints as the etcd client takes them.
func EndpointURLs(endpoints []string, tls bool) []string {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	out := make([]string, len(endpoints))
	for i, e := range endpoints {
		out[i] = (&url.URL{Scheme: scheme, Host: e}).String()
	}
	return out
}

// ElectionPrefix is where the masters of the cluster under prefix
// campaign (master/etcdstore): one key per campaigning master, its
// advertised address as the value, the leader's the oldest.
func ElectionPrefix(prefix string) string { return prefix + "/election/" }
