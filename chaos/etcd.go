//go:build linux

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdPrefix is the masters' etcd prefix in HA mode.
const EtcdPrefix = "/brim"

// EtcdMember is one member of an HA run's etcd cluster, an `etcd`
// process (Debian's etcd-server) with its data on the run's tmpfs.
type EtcdMember struct {
	proc
	Client string // host:port of its client URL
	Peer   string // host:port of its peer URL
}

// newEtcd makes an n-member cluster (not started) with data dirs under
// dir, which the caller mounts. Raft ticks are short (50 ms heartbeat,
// 500 ms election) so that a member's loss is noticed quickly.
func newEtcd(bin, dir, token string, n int) ([]*EtcdMember, error) {
	var ms []*EtcdMember
	var initial []string
	for i := range n {
		client, err := freeAddr()
		if err != nil {
			return nil, err
		}
		peer, err := freeAddr()
		if err != nil {
			return nil, err
		}
		m := &EtcdMember{Client: client, Peer: peer}
		m.Name = fmt.Sprintf("e%d", i)
		ms = append(ms, m)
		initial = append(initial, m.Name+"=http://"+peer)
	}
	for _, m := range ms {
		m.bin, m.logPath = bin, filepath.Join(dir, m.Name+".log")
		// A restart with a data dir ignores the --initial-* flags.
		m.args = []string{"--name", m.Name, "--data-dir", filepath.Join(dir, m.Name),
			"--listen-client-urls", "http://" + m.Client, "--advertise-client-urls", "http://" + m.Client,
			"--listen-peer-urls", "http://" + m.Peer, "--initial-advertise-peer-urls", "http://" + m.Peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", token,
			"--initial-cluster-state", "new", "--heartbeat-interval", "50", "--election-timeout", "500",
			"--logger", "zap", "--log-level", "warn"}
	}
	return ms, nil
}

// Start starts (or restarts) the member without waiting: etcd serves
// clients only once its cluster has a quorum, which a member restarted
// while a peer is down may not have yet.
func (m *EtcdMember) Start() error { return m.start() }

// healthy reports whether the member answers /health with a quorum.
func (m *EtcdMember) healthy() bool {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + m.Client + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// mountTmpfs mounts a tmpfs of size on dir: etcd's fsyncs cost nothing
// there, and the run's cleanup unmounts it.
func mountTmpfs(dir, size string) error {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// leaderWatch reports, on ch, every change of the masters' leader in
// etcd (read directly, not through the masters' links), polling every
// 100 ms until ctx ends; a read that fails (no quorum) changes nothing.
func leaderWatch(ctx context.Context, endpoints []string, ch chan<- Election) error {
	// Quiet: a lost quorum is a fault the harness makes, not news.
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("etcd client for the leader watch: %w", err)
	}
	go func() {
		defer close(ch) // after the client is closed: the reader waits for both
		defer func() { _ = cli.Close() }()
		last := Election{Key: "?"}
		for {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			resp, err := cli.Get(rctx, EtcdPrefix+"/election/", clientv3.WithFirstCreate()...)
			cancel()
			if err == nil {
				e := Election{At: time.Now()}
				if len(resp.Kvs) > 0 {
					e.Key, e.Leader = string(resp.Kvs[0].Key), string(resp.Kvs[0].Value)
				}
				if e.Key != last.Key {
					last = e
					select {
					case ch <- e:
					case <-ctx.Done():
						return
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return nil
}
