// Package cache answers a request the function has answered before with the
// response it computed then, so a settled claim, reconciled again and again
// with the very same request, costs a lookup instead of a composition.
//
// A response is a function of its request alone: the function reads no
// environment and nothing but the request, and the clock only to pace a
// claim that waits (internal/requeue), whose answers fn never caches. So a
// cache keyed by the whole request is exact: see Key.
//
// One response is kept per slot, the last one: a settled XR asks the same
// question every time, and an XR that changes never asks an old one again
// for long. fn gives each XR two slots, its composed answer and its first
// call's. At most max slots are kept; the least recently served goes first.
package cache

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Responses is safe for concurrent use. Its zero value is not usable; call
// New.
type Responses struct {
	max int

	mu     sync.Mutex
	bySlot map[string]*list.Element
	byKey  map[string]*list.Element
	byRsp  map[*fnv1.RunFunctionResponse]*list.Element
	lru    *list.List // of *entry, most recently served first
}

type entry struct {
	slot, key string
	rsp       *fnv1.RunFunctionResponse
	// wire is rsp's protobuf encoding, what gRPC sends.
	wire []byte
}

// New returns a cache of at most max slots' responses.
func New(max int) *Responses {
	return &Responses{max: max, lru: list.New(), bySlot: map[string]*list.Element{},
		byKey: map[string]*list.Element{}, byRsp: map[*fnv1.RunFunctionResponse]*list.Element{}}
}

// Get returns the response computed for the request of this key (a key
// identifies a whole request, so its XR too), if it is the last one its
// slot was answered for. The response is shared: callers must not modify it.
func (c *Responses) Get(key string) (*fnv1.RunFunctionResponse, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*entry).rsp, true
}

// Encoded is the wire encoding of a response the cache holds.
func (c *Responses) Encoded(rsp *fnv1.RunFunctionResponse) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byRsp[rsp]
	if !ok {
		return nil, false
	}
	return el.Value.(*entry).wire, true
}

// Put remembers, in a slot (an XR's, say), the response of the request of
// this key, in place of whatever the slot held. The response must not be modified
// afterwards.
func (c *Responses) Put(slot, key string, rsp *fnv1.RunFunctionResponse) error {
	if c.max <= 0 {
		return nil
	}
	wire, err := proto.Marshal(rsp)
	if err != nil {
		return err
	}
	e := &entry{slot: slot, key: key, rsp: rsp, wire: wire}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.bySlot[slot]; ok {
		c.forget(el)
	}
	el := c.lru.PushFront(e)
	c.bySlot[slot], c.byKey[key], c.byRsp[rsp] = el, el, el
	for c.lru.Len() > c.max {
		c.forget(c.lru.Back())
	}
	return nil
}

func (c *Responses) forget(el *list.Element) {
	e := el.Value.(*entry)
	c.lru.Remove(el)
	for _, index := range []struct {
		m   map[string]*list.Element
		key string
	}{{c.bySlot, e.slot}, {c.byKey, e.key}} {
		if index.m[index.key] == el {
			delete(index.m, index.key)
		}
	}
	if c.byRsp[e.rsp] == el {
		delete(c.byRsp, e.rsp)
	}
}

// Len is how many slots have a response kept.
func (c *Responses) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// Key identifies the whole request. Crossplane's meta.tag is SHA-256 of the
// request's deterministic protobuf encoding, computed once per pipeline
// step, before meta is set and before it calls the function again with the
// required resources it asked for: calls after the first carry the first
// one's tag, with other required resources, extra resources, schemas and
// context. So the key is the tag plus a digest of every field but those the
// tag stands for (TagCovers), unknown ones included, so a field a later
// Crossplane adds cannot go unkeyed. A request whose tag is not such a
// digest, or that has none, is keyed by a digest of the whole of it.
func Key(req *fnv1.RunFunctionRequest) (string, error) {
	tag := req.GetMeta().GetTag()
	if !IsDigest(tag) {
		return digest("sha256:", req)
	}
	rest := &fnv1.RunFunctionRequest{}
	from, to := req.ProtoReflect(), rest.ProtoReflect()
	from.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if !TagCovers[fd.Number()] {
			to.Set(fd, v)
		}
		return true
	})
	to.SetUnknown(from.GetUnknown())
	return digest("tag:"+tag+"/", rest)
}

// TagCovers are the fields of a RunFunctionRequest Crossplane never changes
// between the calls of one tag: observed, desired, input, credentials. The
// tag stands for them; every other field is in the key.
var TagCovers = map[protowire.Number]bool{2: true, 3: true, 4: true, 7: true}

// IsDigest tells whether a tag is what Crossplane computes: 64 hex digits.
// Any other tag (a test's, a hand-made request's) is not trusted to
// identify the request.
func IsDigest(tag string) bool {
	if len(tag) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(tag)
	return err == nil
}

func digest(prefix string, m proto.Message) (string, error) {
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return prefix + hex.EncodeToString(sum[:]), nil
}

// XR names the request's XR: apiVersion, kind, namespace and name.
func XR(req *fnv1.RunFunctionRequest) string {
	xr := req.GetObserved().GetComposite().GetResource().GetFields()
	meta := xr["metadata"].GetStructValue().GetFields()
	return xr["apiVersion"].GetStringValue() + "/" + xr["kind"].GetStringValue() + "/" +
		meta["namespace"].GetStringValue() + "/" + meta["name"].GetStringValue()
}
