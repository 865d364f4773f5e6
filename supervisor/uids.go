package supervisor

import (
	"fmt"

	"github.com/forgedev/forged/messages"
)

// Sandbox uids.
//
// Every sandbox running as one host uid shares the kernel's per-uid
// limits: fs.inotify.max_user_instances (128 by default) and the watches,
// POSIX message queues, pending signals. One attempt holding them all
// breaks every other attempt's file watchers. So the supervisor gives each
// capacity slot its own uid from the operator's range (Config.UIDBase):
// slot i runs as UIDBase+i (its gid equal), and an admitted attempt holds
// the lowest free one until it finishes. No two live attempts share a uid,
// and at most Config.Slots uids are ever used. A re-adopted attempt holds
// the uid its ledger recorded, whatever the range is now.

// Bounds of the operator's sandbox uid range.
const (
	// DefaultUIDBase is the first sandbox uid: far above the ids of
	// login users and system accounts (and of nobody, 65534).
	DefaultUIDBase = 100000
	// MinUIDBase keeps the range off root, system accounts, the image
	// user (messages.WorkerUID) and the usual login users.
	MinUIDBase = 20000
	// maxUID is the last uid the range may reach: below 2^31-1, which
	// some tools treat as invalid.
	maxUID = 1<<31 - 2
)

// ValidateUIDRange checks the operator's sandbox uid range: slots uids
// from base on. The error names the setting and what to do.
func ValidateUIDRange(base, slots int) error {
	switch {
	case base < MinUIDBase:
		return fmt.Errorf("sandbox-uid-base %d is below %d: choose a range of unused uids above the system's and login users' (default %d)", base, MinUIDBase, DefaultUIDBase)
	case slots < 1:
		return fmt.Errorf("the sandbox uid range needs at least one slot")
	case base > maxUID-(slots-1):
		return fmt.Errorf("sandbox-uid-base %d with %d slots runs past uid %d: choose a lower base", base, slots, maxUID)
	case base <= 65534 && 65534 <= base+slots-1:
		return fmt.Errorf("sandbox-uid-base %d with %d slots includes 65534 (nobody): choose a base above it or a range below it", base, slots)
	}
	return nil
}

// uidSlots assigns sandbox uids to live attempts. Its state is the
// supervisor's, touched only in its Receive.
type uidSlots struct {
	base, size int                             // base 0: no range, every attempt gets the zero user
	byAttempt  map[string]messages.SandboxUser // live attempts' users
	holders    map[int]int                     // uid → live attempts holding it (more than one only from damaged ledgers)
}

func newUIDSlots(base, size int) *uidSlots {
	return &uidSlots{base: base, size: size, byAttempt: map[string]messages.SandboxUser{}, holders: map[int]int{}}
}

// take gives attempt id the lowest free uid of the range. ok is false when
// every uid of the range is held (the supervisor admits no more attempts
// than slots, so only adoptions beyond the slots can cause it). Without a
// range it gives the zero user (the attempt runs as messages.ImageUser).
func (u *uidSlots) take(id string) (user messages.SandboxUser, ok bool) {
	if u.base == 0 {
		return messages.SandboxUser{}, true
	}
	for uid := u.base; uid < u.base+u.size; uid++ {
		if u.holders[uid] == 0 {
			user = messages.SandboxUser{UID: uid, GID: uid}
			u.hold(id, user)
			return user, true
		}
	}
	return messages.SandboxUser{}, false
}

// hold records that attempt id runs as user (an adoption's recorded user,
// or one take chose). It reports false when another live attempt already
// holds that uid: only a damaged ledger can say so; the attempt still
// holds it, so the uid is not given out again before both have finished.
func (u *uidSlots) hold(id string, user messages.SandboxUser) bool {
	if user.IsZero() {
		return true
	}
	u.release(id)
	u.byAttempt[id] = user
	u.holders[user.UID]++
	return u.holders[user.UID] == 1
}

// release frees the uid attempt id held (if any).
func (u *uidSlots) release(id string) {
	user, ok := u.byAttempt[id]
	if !ok {
		return
	}
	delete(u.byAttempt, id)
	if u.holders[user.UID]--; u.holders[user.UID] <= 0 {
		delete(u.holders, user.UID)
	}
}

// of returns the user attempt id holds (zero if none).
func (u *uidSlots) of(id string) messages.SandboxUser { return u.byAttempt[id] }
