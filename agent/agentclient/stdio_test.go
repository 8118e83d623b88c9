package agentclient

import "testing"

func TestScanDetach(t *testing.T) {
	keys := DefaultDetachKeys
	var held []byte
	out, det := scanDetach(keys, &held, []byte("ab\x10c"))
	if string(out) != "ab\x10c" || det {
		t.Fatalf("a lone ctrl-p: %q %v", out, det)
	}
	out, det = scanDetach(keys, &held, []byte("x\x10"))
	if string(out) != "x" || det || string(held) != "\x10" {
		t.Fatalf("ctrl-p at a read's end is held: %q %v held %q", out, det, held)
	}
	out, det = scanDetach(keys, &held, []byte("\x11rest"))
	if len(out) != 0 || !det {
		t.Fatalf("ctrl-p ctrl-q across reads: %q %v", out, det)
	}
	held = nil
	if out, det := scanDetach(nil, &held, []byte("\x10\x11")); string(out) != "\x10\x11" || det {
		t.Fatalf("no detach keys: %q %v", out, det)
	}
}
