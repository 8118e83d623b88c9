package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

// A layer unpack shared by two pulls is not lost to the second when the
// first pull's caller gives up: the second runs it again with its own
// context.
func TestSharedLayerSurvivesOtherCancel(t *testing.T) {
	testutil.RequireRoot(t)
	s := openStore(t, Options{})
	data := tarOf(t, file("f", "content"))
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])

	ctxA, cancelA := context.WithCancel(context.Background())
	opened := make(chan struct{})
	specA := layerSpec{Ref: "a", DiffID: digest, Digest: digest, Size: int64(len(data)),
		Open: func() (io.ReadCloser, error) {
			close(opened)
			<-ctxA.Done() // the first pull's caller gives up while it waits
			return nil, ctxA.Err()
		}}
	specB := specA
	specB.Ref = "b"
	specB.Open = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }

	errA := make(chan error, 1)
	go func() { _, err := s.ensureLayer(ctxA, specA); errA <- err }()
	<-opened
	errB := make(chan error, 1)
	go func() { _, err := s.ensureLayer(context.Background(), specB); errB <- err }()
	// Let B join A's unpack before A is cancelled. (Should B be later,
	// it runs its own unpack and the test passes without testing the
	// retry; it can never fail for it.)
	time.Sleep(200 * time.Millisecond)
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled pull = %v, want context.Canceled", err)
	}
	if err := <-errB; err != nil {
		t.Fatalf("the other pull of the layer = %v, want success", err)
	}
	if _, ok := s.layers[digest]; !ok {
		t.Error("layer not in the store")
	}
	if ents, _ := os.ReadDir(filepath.Join(s.root, dirTmp)); len(ents) != 0 {
		t.Errorf("tmp holds %v", names(ents))
	}
}
