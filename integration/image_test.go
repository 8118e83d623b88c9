package integration

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/brimnode/brim/internal/testregistry"
	"github.com/brimnode/brim/internal/testutil"
)

// imageRegistry is a loopback registry holding app:1, a 3-layer busybox
// image: the middle layer adds /etc/motd and /srv/data, the top one
// changes /etc/motd and deletes /srv/data. Its working dir is /srv and
// its cmd prints the motd.
type imageRegistry struct {
	*testregistry.Registry
	ref, digest string
}

func startImageRegistry(t *testing.T) *imageRegistry {
	t.Helper()
	reg := testregistry.Start(t, testregistry.Options{})
	mid := testregistry.Layer(t, testregistry.TarEntries(t,
		testregistry.Entry{Name: "etc/"}, testregistry.Entry{Name: "etc/motd", Body: []byte("middle\n")},
		testregistry.Entry{Name: "srv/"}, testregistry.Entry{Name: "srv/data", Body: []byte("data\n")}))
	top := testregistry.Layer(t, testregistry.TarEntries(t,
		testregistry.Entry{Name: "etc/"}, testregistry.Entry{Name: "etc/motd", Body: []byte("from the image\n")},
		testregistry.Entry{Name: "srv/"}, testregistry.Entry{Name: "srv/.wh.data"}))
	img := testregistry.BusyboxImage(t, v1.Config{Cmd: []string{"cat", "/etc/motd"}, WorkingDir: "/srv",
		Env: []string{"GREETING=hello"}, ExposedPorts: map[string]struct{}{"8080/tcp": {}}}, mid, top)
	return &imageRegistry{Registry: reg, ref: reg.Ref("app:1"), digest: reg.Push(t, "app:1", img)}
}

// imageView is the part of brim container inspect about images.
type imageView struct {
	ID           string    `json:"id"`
	State        string    `json:"state"`
	Image        string    `json:"image"`
	ImageID      string    `json:"imageId"`
	ImageDigest  string    `json:"imageDigest"`
	ExposedPorts []string  `json:"exposedPorts"`
	Exit         *exitJSON `json:"exit"`
}

func (a *agentProc) inspectImage(id string) imageView {
	a.t.Helper()
	var v imageView
	if err := json.Unmarshal([]byte(a.mustBrim("container", "inspect", id)), &v); err != nil {
		a.t.Fatal(err)
	}
	return v
}

// imagesState checks the agent's image store holds nothing half-made:
// no snapshot but those of want, nothing in tmp.
func (a *agentProc) imagesState(stateDir string, want ...string) {
	a.t.Helper()
	root := filepath.Join(stateDir, "images")
	ents, _ := os.ReadDir(filepath.Join(root, "snapshots"))
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		a.t.Errorf("snapshots %v, want %v", got, want)
	}
	if tmp, _ := os.ReadDir(filepath.Join(root, "tmp")); len(tmp) != 0 {
		a.t.Errorf("image store tmp/ holds %d entries after the pulls", len(tmp))
	}
}

// TestImageRun (issue 32): brim image pull, ls, rm, prune and brim
// container run --image through the real agent: the image's cmd, env,
// working dir and stacked layers, the default user resolved in the
// image, inspect showing the digest, a read-only root, the snapshot gone
// with the container, an image in use kept.
func TestImageRun(t *testing.T) {
	reg := startImageRegistry(t)
	metrics := testutil.FreeAddr(t)
	a := startAgent(t, "--image-insecure-registry", reg.Host, "--metrics-listen", metrics)

	id := strings.TrimSpace(a.mustBrim("image", "pull", reg.ref))
	if !strings.HasPrefix(id, "sha256:") {
		t.Fatalf("image pull printed %q, want the image ID", id)
	}
	if out := a.mustBrim("image", "ls"); !strings.Contains(out, reg.ref) || !strings.Contains(out, "3") {
		t.Errorf("image ls lacks %s with its 3 layers:\n%s", reg.ref, out)
	}
	// The pull's figures on the agent's /metrics.
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, w := range []string{`brim_image_pulls_total{result="ok"} 1`, "brim_image_layers_unpacked_total 3", "brim_image_pull_seconds_count 1"} {
		if !strings.Contains(string(body), w+"\n") {
			t.Errorf("/metrics lacks %q", w)
		}
	}
	for _, m := range []string{"brim_image_cache_bytes", "brim_image_pulled_bytes_total"} {
		if !regexp.MustCompile(`(?m)^` + m + ` [1-9][0-9.e+]*$`).Match(body) {
			t.Errorf("/metrics: %s is not positive:\n%s", m, body)
		}
	}

	// The image's cmd, with the defaults.
	c := a.run("--image", reg.ref, "--name", "plain", "--wait")
	if out := a.mustBrim("container", "logs", "plain"); out != "from the image\n" {
		t.Errorf("the image's cmd printed %q", out)
	}
	v := a.inspectImage(c)
	if v.Image != reg.ref || v.ImageID != id || v.ImageDigest != reg.digest || strings.Join(v.ExposedPorts, ",") != "8080/tcp" {
		t.Errorf("inspect: %+v; want image %s, ID %s, digest %s, exposed 8080/tcp", v, reg.ref, id, reg.digest)
	}

	// A command of the user's, on the image's defaults.
	script := `echo "$GREETING $(pwd) uid=$(id -u)"; test -e /srv/data && echo data=visible || echo data=hidden; touch /x 2>/dev/null && echo root=rw || echo root=ro`
	a.run("--image", reg.ref, "--name", "script", "--pull", "never", "--wait", "--", "sh", "-c", script)
	out := a.mustBrim("container", "logs", "script")
	for _, w := range []string{"hello /srv uid=65534", "data=hidden", "root=ro"} {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	// Read-write: the container's own upper dir.
	a.run("--image", reg.ref, "--name", "rw", "--read-write", "--user", "app", "--wait", "--", "sh", "-c", "touch /home/app/x")
	a.imagesState(a.StateDir, mustIDs(a, "plain", "script", "rw")...)

	// In use: kept; once its containers are gone, removed.
	if r := a.brim("image", "rm", reg.ref); r.code == 0 || !strings.Contains(r.stderr, "in use") {
		t.Errorf("image rm of an image in use: exit %d: %s%s; want a refusal saying it is in use", r.code, r.stdout, r.stderr)
	}
	for _, n := range []string{"plain", "script", "rw"} {
		a.mustBrim("container", "rm", n)
	}
	a.imagesState(a.StateDir)
	if out := a.mustBrim("image", "rm", reg.ref); !strings.Contains(out, "removed") {
		t.Errorf("image rm: %q", out)
	}
	if out := a.mustBrim("image", "prune"); !strings.Contains(out, "nothing to remove") {
		t.Errorf("image prune after rm: %q", out)
	}
	if out := a.mustBrim("image", "ls"); strings.Contains(out, reg.ref) {
		t.Errorf("image ls after rm:\n%s", out)
	}
}

// mustIDs is the sorted IDs of the named containers.
func mustIDs(a *agentProc, names ...string) []string {
	var ids []string
	for _, n := range names {
		ids = append(ids, a.inspectImage(n).ID)
	}
	slices.Sort(ids)
	return ids
}

// TestImageBadInput (issue 32): through the real agent, each bad image
// fails brim container run --image with an error naming the cause and a
// non-zero exit, leaves no container, no snapshot and nothing in the
// store's tmp/, and the agent serves on.
func TestImageBadInput(t *testing.T) {
	reg := startImageRegistry(t)
	arm := testregistry.Image(t, "linux/arm64", v1.Config{Cmd: []string{"true"}},
		testregistry.Layer(t, testregistry.TarEntries(t, testregistry.Entry{Name: "f", Body: []byte("x")})))
	reg.Push(t, "armonly:1", arm)
	hostile := testregistry.BusyboxImage(t, v1.Config{Cmd: []string{"true"}},
		testregistry.Layer(t, testregistry.TarEntries(t, testregistry.Entry{Name: "../escaped", Body: []byte("x")})))
	reg.Push(t, "hostile:1", hostile)
	corrupt := testregistry.BusyboxImage(t, v1.Config{Cmd: []string{"true"}},
		testregistry.Layer(t, testregistry.TarEntries(t, testregistry.Entry{Name: "data", Body: []byte(strings.Repeat("corrupt me ", 1000))})))
	reg.Push(t, "corrupt:1", corrupt)
	layers, err := corrupt.Layers()
	if err != nil {
		t.Fatal(err)
	}
	d, err := layers[1].Digest()
	if err != nil {
		t.Fatal(err)
	}
	flip(t, reg.BlobPath(d.String()))
	nowhere := "127.0.0.1:1" // nothing listens on port 1
	a := startAgent(t, "--image-insecure-registry", reg.Host, "--image-insecure-registry", nowhere)

	run := func(ref string, extra ...string) []string {
		return append([]string{"container", "run", "--image", ref, "--wait"}, extra...)
	}
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"unknown registry", run(nowhere + "/app:1"), "127.0.0.1:1"},
		{"unknown tag", run(reg.Ref("app:nope")), "not found"},
		{"unknown digest", run(reg.Ref("app@sha256:" + strings.Repeat("0", 64))), "not found"},
		{"wrong digest", run(reg.Ref("corrupt:1")), "digest mismatch"},
		{"other architecture", run(reg.Ref("armonly:1")), "want linux/amd64, image has linux/arm64"},
		{"hostile layer", run(reg.Ref("hostile:1")), `unsafe layer: entry "../escaped"`},
		{"bad reference", run("Bad/Upper:1"), "invalid image reference"},
		{"not cached, pull never", run(reg.ref, "--pull", "never"), "pull policy is never"},
		{"bad pull policy", run(reg.ref, "--pull", "sometimes"), "sometimes"},
	} {
		r := a.brim(tc.args...)
		t.Logf("%s: exit %d: %s", tc.name, r.code, strings.TrimSpace(r.stderr))
		if r.code == 0 || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%s: exit %d, stderr %q; want a failure saying %q", tc.name, r.code, r.stderr, tc.says)
		}
		if n := len(a.list()); n != 0 {
			t.Errorf("%s: %d containers left", tc.name, n)
		}
		a.imagesState(a.StateDir)
		a.mustBrim("agent", "info") // serves on
	}
	if _, err := os.Stat(filepath.Join(a.StateDir, "escaped")); err == nil {
		t.Error("the hostile layer wrote outside its directory")
	}
	// After all that, a good image runs.
	a.run("--image", reg.ref, "--name", "good", "--wait")
	if out := a.mustBrim("container", "logs", "good"); out != "from the image\n" {
		t.Errorf("a good image after the bad ones printed %q", out)
	}
}

// flip corrupts a registry blob in place (same size).
func flip(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestImagePullDiskFull (issue 32): a pull that fills the disk under the
// agent's state dir fails the launch with "no space left on device",
// leaves nothing half-made, and the agent serves on: once the big image
// is gone from the request, a small one runs.
func TestImagePullDiskFull(t *testing.T) {
	reg := startImageRegistry(t)
	big := make([]byte, 48<<20) // incompressible: the layer is as large unpacked
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	reg.Push(t, "big:1", testregistry.BusyboxImage(t, v1.Config{Cmd: []string{"true"}},
		testregistry.Layer(t, testregistry.TarEntries(t, testregistry.Entry{Name: "big", Body: big}))))
	dir, err := os.MkdirTemp("/var/tmp", "brim-it-full-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=40m,mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	state := filepath.Join(dir, "state")
	a := startAgent(t, "--state-dir", state, "--image-insecure-registry", reg.Host)

	r := a.brim("container", "run", "--image", reg.Ref("big:1"), "--wait")
	t.Logf("exit %d: %s", r.code, strings.TrimSpace(r.stderr))
	if r.code == 0 || !strings.Contains(r.stderr, "no space left on device") {
		t.Errorf("run of an image larger than the disk: exit %d, stderr %q; want no space left on device", r.code, r.stderr)
	}
	if n := len(a.list()); n != 0 {
		t.Errorf("%d containers left", n)
	}
	a.imagesState(state)
	a.run("--image", reg.ref, "--name", "small", "--wait")
	if out := a.mustBrim("container", "logs", "small"); out != "from the image\n" {
		t.Errorf("a small image after the full disk printed %q", out)
	}
}

// TestImageRecoverAndCleanup (issue 32): after the agent's kill -9 an
// image container is recovered with its snapshot, which goes with the
// container; a snapshot left by a container the agent never recorded
// goes at recovery; brim agent cleanup removes the snapshots of a dead
// agent's containers (the cache stays).
func TestImageRecoverAndCleanup(t *testing.T) {
	reg := startImageRegistry(t)
	a := startAgent(t, "--image-insecure-registry", reg.Host)
	keep := a.run("--image", reg.ref, "--", "sleep", "300")
	a.kill9()
	// A launch the agent died in the middle of: its snapshot is on disk,
	// its container nowhere (made by hand: the store's layout).
	orphan := filepath.Join(a.StateDir, "images", "snapshots", "orphan-launch")
	for _, d := range []string{"upper", "work"} {
		if err := os.MkdirAll(filepath.Join(orphan, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	imgID := a.inspectImageFromDisk(keep)
	if err := os.WriteFile(filepath.Join(orphan, "lease.json"), []byte(`{"Image":"`+imgID+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	a.start()
	if v := a.inspectImage(keep); v.State != "running" {
		t.Fatalf("image container after the agent's kill -9: %+v", v)
	}
	a.imagesState(a.StateDir, keep)

	a.kill9()
	r := runBrim(t, "agent", "cleanup", "--state-dir", a.StateDir, "--socket", a.Socket, "--cgroup-parent", a.Parent)
	if r.code != 0 || !strings.Contains(r.stdout, "removed snapshot of container "+keep) {
		t.Errorf("cleanup: exit %d: %s%s; want it to remove %s's snapshot", r.code, r.stdout, r.stderr, keep)
	}
	a.imagesState(a.StateDir)
	if layers, _ := os.ReadDir(filepath.Join(a.StateDir, "images", "layers", "sha256")); len(layers) != 3 {
		t.Errorf("cleanup left %d layers in the cache, want the image's 3", len(layers))
	}
}

// inspectImageFromDisk reads container id's image ID from the agent's
// checkpoint (the agent is down).
func (a *agentProc) inspectImageFromDisk(id string) string {
	a.t.Helper()
	b, err := os.ReadFile(filepath.Join(a.StateDir, "checkpoint", id+".json"))
	if err != nil {
		a.t.Fatal(err)
	}
	var rec struct {
		ImageID string `json:"imageId"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.ImageID == "" {
		a.t.Fatalf("checkpoint of %s: %v, image %q", id, err, rec.ImageID)
	}
	return rec.ImageID
}

// TestImageDiskLimit (issue 32): a read-write image root that writes
// more than its disk is killed with reason disk-limit (measured: this
// machine's kernel has no xfs quotas); the agent's disk, less the image
// cache's cap, is accounted.
func TestImageDiskLimit(t *testing.T) {
	reg := startImageRegistry(t)
	a := startAgent(t, "--image-insecure-registry", reg.Host, "--resources", "cpus:2;mem:2048;disk:2048",
		"--image-cache-max", "1024", "--image-disk-interval", "200ms")
	if out := a.mustBrim("agent", "info"); !strings.Contains(out, "disk:1024") {
		t.Errorf("agent info does not offer disk 2048 less the cache's 1024:\n%s", out)
	}
	id := a.run("--image", reg.ref, "--read-write", "--user", "app", "--disk", "4", "--", "sh", "-c",
		"dd if=/dev/zero of=/home/app/big bs=1M count=16 2>/dev/null; sleep 300")
	eventually(t, "the container is killed over its disk", func() bool { return a.inspectImage(id).State == "exited" })
	if e := a.inspectImage(id).Exit; e == nil || e.Reason != "disk-limit" || !strings.Contains(e.Message, "over its disk limit of 4 MiB") {
		t.Errorf("exit %+v, want reason disk-limit naming the limit", e)
	}
	r := a.brim("container", "run", "--image", reg.ref, "--disk", "2000", "--wait")
	if r.code == 0 || !strings.Contains(r.stderr, "insufficient resources") {
		t.Errorf("a disk beyond the agent's: exit %d: %s", r.code, r.stderr)
	}
}

// TestImageThroughMaster (issue 32): brim run --image runs a task from an
// image through the master; the agent's container shows the image's
// digest and /state the task's image; a task whose image cannot be
// pulled fails naming the cause; one over its disk fails with
// CONTAINER_LIMITATION_DISK.
func TestImageThroughMaster(t *testing.T) {
	reg := startImageRegistry(t)
	addr := testutil.FreeAddr(t)
	a := startDevProc(t, "--listen", addr, "--allocation-interval", "100ms", "--image-insecure-registry", reg.Host,
		"--resources", "cpus:2;mem:2048;disk:2048", "--image-cache-max", "1024", "--image-disk-interval", "200ms")

	r := runBrim(t, "run", "--master", addr, "--task-id", "img", "--image", reg.ref, "--", "sh", "-c", "cat /etc/motd; test -e /srv/data && exit 9 || exit 0")
	if r.code != 0 || !strings.Contains(r.stdout, "FINISHED") {
		t.Fatalf("brim run --image: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	var found bool
	for _, c := range a.list() {
		if v := a.inspectImage(c.ID); v.Image == reg.ref {
			found = true
			if v.ImageDigest != reg.digest {
				t.Errorf("the task's container shows digest %q, want %s", v.ImageDigest, reg.digest)
			}
		}
	}
	if !found {
		t.Error("no container of the image on the agent")
	}
	resp, err := http.Get("http://" + addr + "/state")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Tasks, CompletedTasks []struct{ ID, Image string }
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if all := append(st.Tasks, st.CompletedTasks...); len(all) != 1 || all[0].ID != "img" || all[0].Image != reg.ref {
		t.Errorf("/state tasks %+v, want task img with image %s", all, reg.ref)
	}

	r = runBrim(t, "run", "--master", addr, "--image", reg.Ref("app:nope"))
	if r.code == 0 || !strings.Contains(r.stdout, "FAILED") || !strings.Contains(r.stdout, "not found") {
		t.Errorf("brim run of a missing tag: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runBrim(t, "run", "--master", addr, "--image", reg.ref, "--read-write", "--disk", "4", "--user", "app", "--",
		"sh", "-c", "dd if=/dev/zero of=/home/app/big bs=1M count=16 2>/dev/null; sleep 300")
	if r.code == 0 || !strings.Contains(r.stdout, "CONTAINER_LIMITATION_DISK") {
		t.Errorf("brim run over its disk: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runBrim(t, "run", "--master", addr, "--timeout", "20s", "--image", "Bad/Upper:1")
	if r.code == 0 {
		t.Errorf("brim run of a bad reference: exit 0:\n%s", r.stdout)
	}
	t.Logf("bad reference: %s%s", r.stdout, r.stderr)
}

// TestImageConfinement (issue 32, issue 13's probes on an image root):
// through the agent, an image container as the default user has no new
// privileges, seccomp and no capabilities, cannot see the agent's
// socket or state dir, and cannot mount; an image whose user is root is
// refused without --allow-root-tasks; with --userns its root is the
// range's first host uid, the image's files are root's inside, and the
// layers on disk keep their owners.
func TestImageConfinement(t *testing.T) {
	reg := startImageRegistry(t)
	reg.Push(t, "rootimg:1", testregistry.BusyboxImage(t, v1.Config{Cmd: []string{"id", "-u"}, User: "root"}))
	a := startAgent(t, "--image-insecure-registry", reg.Host, "--userns-range", "3000000000:65536")
	if err := os.Chmod(filepath.Dir(a.StateDir), 0o711); err != nil { // the namespace's root reaches the containers
		t.Fatal(err)
	}
	script := strings.Join([]string{
		`grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status`,
		`test -e ` + a.Socket + ` && echo socket=visible || echo socket=absent`,
		`test -e ` + a.StateDir + ` && echo state=visible || echo state=absent`,
		`mount -t tmpfs none /tmp 2>/dev/null && echo mount=allowed || echo mount=denied`,
	}, "; ")
	a.run("--image", reg.ref, "--name", "probe", "--wait", "--", "sh", "-c", script)
	out := a.mustBrim("container", "logs", "probe")
	for _, w := range []string{"NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000", "socket=absent", "state=absent", "mount=denied"} {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	r := a.brim("container", "run", "--image", reg.Ref("rootimg:1"), "--wait")
	if r.code == 0 || !strings.Contains(r.stderr, "allow-root-tasks") {
		t.Errorf("an image whose user is root, without --allow-root-tasks: exit %d: %s", r.code, r.stderr)
	}
	id := a.run("--image", reg.Ref("rootimg:1"), "--userns", "--read-write", "--", "sh", "-c",
		`echo uid=$(id -u) owner=$(stat -c %u /bin/busybox); echo x > /written; exec sleep 300`)
	var logs string
	eventually(t, "the userns container's output", func() bool {
		logs = a.brim("container", "logs", id).stdout
		return strings.Contains(logs, "owner=")
	})
	if !strings.Contains(logs, "uid=0 owner=0\n") {
		t.Errorf("in a user namespace the image's root runs as root and owns its files: %q", logs)
	}
	var c struct{ Pid int }
	if err := json.Unmarshal([]byte(a.mustBrim("container", "inspect", id)), &c); err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(c.Pid) + "/status")
	if err != nil || !strings.Contains(string(status), "Uid:\t3000000000\t") {
		t.Errorf("the image's root on the host is not uid 3000000000 (%v):\n%s", err, status)
	}
	var st syscall.Stat_t
	written := filepath.Join(a.StateDir, "images", "snapshots", id, "upper", "written")
	eventually(t, "the write in the upper dir", func() bool { return syscall.Stat(written, &st) == nil })
	if st.Uid != 3000000000 {
		t.Errorf("the image root's write is host uid %d, want 3000000000", st.Uid)
	}
	layers, _ := filepath.Glob(filepath.Join(a.StateDir, "images", "layers", "sha256", "*", "fs", "bin", "busybox"))
	for _, l := range layers {
		if err := syscall.Stat(l, &st); err != nil || st.Uid != 0 {
			t.Errorf("layer file %s owned by %d (%v): a layer was chowned", l, st.Uid, err)
		}
	}
}
