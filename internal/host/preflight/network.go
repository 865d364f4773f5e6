package preflight

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// IsolationProber creates a throwaway isolated network and checks it from
// the host's side; *dockerops.Client is one.
type IsolationProber interface {
	ProbeNetworkIsolation(ctx context.Context) NetworkIsolation
}

// NetworkIsolation is messages.NetworkIsolation (the wire type lives there).
type NetworkIsolation = messages.NetworkIsolation

// DefaultIsolationTTL is how long a network isolation probe stays valid;
// the engine's identity changing (a restart into another version) probes
// again at once.
const DefaultIsolationTTL = 10 * time.Minute

// NetworkFacts is messages.NetworkFacts (the wire type lives there).
type NetworkFacts = messages.NetworkFacts

// DNSFacts is messages.DNSFacts (the wire type lives there).
type DNSFacts = messages.DNSFacts

// InternalDNSForwardingFixed reports whether an engine of this version
// stops forwarding DNS from internal networks (CVE-2024-29018: fixed in
// 26.0.0, 25.0.5 and 23.0.11; never in 24.0). Distribution suffixes
// (20.10.24+dfsg1) are ignored; a pre-release of a fixing version
// (26.0.0-rc1) and an unparsable version are not fixed.
func InternalDNSForwardingFixed(version string) bool {
	v := strings.TrimPrefix(strings.TrimSpace(version), "v")
	if i := strings.IndexAny(v, "+~ "); i >= 0 {
		v = v[:i]
	}
	v, pre, _ := strings.Cut(v, "-")
	parts := strings.Split(v, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return false
	}
	var num [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return false
		}
		num[i] = n
	}
	// atLeast compares with a fixing release; a pre-release of it is older.
	atLeast := func(fix [3]int) bool {
		for i := range num {
			if num[i] != fix[i] {
				return num[i] > fix[i]
			}
		}
		return pre == ""
	}
	switch major := num[0]; {
	case major >= 26:
		return major > 26 || atLeast([3]int{26, 0, 0})
	case major == 25:
		return atLeast([3]int{25, 0, 5})
	case major == 23:
		return atLeast([3]int{23, 0, 11})
	}
	return false
}

func dnsFacts(version, nameserver string) DNSFacts {
	d := DNSFacts{InternalForwardingFixed: InternalDNSForwardingFixed(version)}
	mitigation := "no sandbox nameserver is known: attempts that need a network are refused"
	if nameserver != "" {
		mitigation = fmt.Sprintf("sandboxes name only their own loopback (%s) as nameserver, which the embedded resolver dials inside the container, so nothing leaves it", nameserver)
	}
	if d.InternalForwardingFixed {
		d.Note = fmt.Sprintf("engine %s does not forward DNS from internal networks; %s", version, mitigation)
	} else {
		d.Note = fmt.Sprintf("engine %s forwards DNS from internal networks (CVE-2024-29018, fixed in 26.0.0/25.0.5/23.0.11); %s", version, mitigation)
	}
	return d
}

// networkFacts probes isolation when there is no valid probe for this
// engine; c.mu is held.
func (c *Checker) networkFacts(ctx context.Context, engineID string, version string) NetworkFacts {
	now := c.now()
	if c.isolationFor != engineID || c.isolationAt.IsZero() || now.Sub(c.isolationAt) >= c.opts.IsolationTTL {
		res := NetworkIsolation{Reason: "no isolation prober is configured"}
		if c.opts.Isolation != nil {
			probeCtx, cancel := context.WithTimeout(ctx, 4*c.opts.CallTimeout)
			res = c.opts.Isolation.ProbeNetworkIsolation(probeCtx)
			cancel()
		}
		switch {
		case ctx.Err() == nil:
			c.isolation, c.isolationFor, c.isolationAt = res, engineID, now
		case c.isolationFor != engineID:
			// A probe cut short by the caller says nothing about the
			// engine; without an earlier probe of it, nothing is verified.
			res.Verified = false
			c.isolation, c.isolationFor, c.isolationAt = res, "", time.Time{}
		}
	}
	n := NetworkFacts{DefaultMode: "none", DNS: dnsFacts(version, c.isolation.Nameserver), Isolation: c.isolation, ProbedAt: c.isolationAt}
	if !n.Isolation.Verified {
		n.Code = failure.SandboxNetworkIsolation
	}
	return n
}
