package allocator

// entry is one element of a sorter heap: a client (framework in a role) or a
// role, ordered by key (exactly, see shareKey) then by tie (insertion
// sequence: the older first), which makes every order deterministic for a
// given seed.
type entry struct {
	key shareKey
	tie uint64
	id  int32
}

func (e *entry) less(o *entry) bool {
	x, y := &e.key, &o.key
	if x.sameScale(y) {
		// The common case (float keys included): the numerators decide.
		if x.num != y.num {
			return x.num < y.num
		}
		return e.tie < o.tie
	}
	if c := cmpKeys(x, y); c != 0 {
		return c < 0
	}
	return e.tie < o.tie
}

// minHeap is a binary min-heap of entries. pos, when set, receives the index
// of every id in the heap (-1 once popped), so a changed key can be fixed in
// O(log n) without a search.
type minHeap struct {
	e   []entry
	pos []int32 // indexed by id; nil when positions are not tracked
}

func (h *minHeap) len() int { return len(h.e) }

func (h *minHeap) reset() { h.e = h.e[:0] }

func (h *minHeap) setPos(i int) {
	if h.pos != nil {
		h.pos[h.e[i].id] = int32(i)
	}
}

func (h *minHeap) push(x entry) {
	h.e = append(h.e, x)
	h.setPos(len(h.e) - 1)
	h.up(len(h.e) - 1)
}

func (h *minHeap) pop() entry {
	top := h.e[0]
	n := len(h.e) - 1
	h.e[0] = h.e[n]
	h.e = h.e[:n]
	if n > 0 {
		h.setPos(0)
		h.down(0)
	}
	if h.pos != nil {
		h.pos[top.id] = -1
	}
	return top
}

// init establishes the heap order in O(n).
func (h *minHeap) init() {
	for i := range h.e {
		h.setPos(i)
	}
	for i := len(h.e)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *minHeap) up(i int) {
	x := h.e[i]
	for i > 0 {
		p := (i - 1) / 2
		if !x.less(&h.e[p]) {
			break
		}
		h.e[i] = h.e[p]
		h.setPos(i)
		i = p
	}
	h.e[i] = x
	h.setPos(i)
}

func (h *minHeap) down(i int) {
	n := len(h.e)
	x := h.e[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && h.e[r].less(&h.e[l]) {
			c = r
		}
		if !h.e[c].less(&x) {
			break
		}
		h.e[i] = h.e[c]
		h.setPos(i)
		i = c
	}
	h.e[i] = x
	h.setPos(i)
}

// fix restores the order after the key of the element at i changed.
func (h *minHeap) fix(i int, key shareKey) {
	old := h.e[i]
	h.e[i].key = key
	if h.e[i].less(&old) {
		h.up(i)
	} else {
		h.down(i)
	}
}
