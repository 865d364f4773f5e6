package preflight

import (
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/quota"
)

// Report is one preflight verdict. Available is true exactly when Code is
// empty and Capacity is positive.
type Report struct {
	// Generation numbers the Cache's refreshes (0 from a bare Checker).
	Generation uint64    `json:"generation"`
	CheckedAt  time.Time `json:"checkedAt"`

	Available bool         `json:"available"`
	Code      failure.Code `json:"code,omitempty"`
	Reason    string       `json:"reason,omitempty"`
	// Capacity is how many attempts may run at once; 0 when unavailable.
	Capacity int `json:"capacity"`
	// MaxSlots is the configured maximum the capacity never exceeds.
	MaxSlots int `json:"maxSlots"`
	// RootlessRequired is false when a rootful engine was allowed.
	RootlessRequired bool `json:"rootlessRequired"`

	Platform Platform     `json:"platform"`
	Engine   EngineFacts  `json:"engine"`
	Features Features     `json:"features"`
	Network  NetworkFacts `json:"network"`
	Disk     DiskState    `json:"disk"`
	// Storage says how attempt volumes are bounded (quota.Detect).
	Storage quota.Facts `json:"storage"`
	// DiskSlots is the disk side of admission.
	DiskSlots DiskSlots `json:"diskSlots"`
	Memory    Memory    `json:"memory"`
	CPU       CPU       `json:"cpu"`
	// Services is the service catalogue's state in the engine: every
	// configured service, its pinned image and whether the engine holds
	// exactly that image (ready, missing, mismatch, unknown). A service
	// that is not ready refuses the attempts declaring it, not the host.
	Services []ServiceImage `json:"services,omitempty"`
}

// ServiceImage is one service catalogue entry's state.
type ServiceImage struct {
	Service string `json:"service"`
	Ref     string `json:"ref"`
	ImageID string `json:"imageId"`
	State   string `json:"state"`
	Detail  string `json:"detail,omitempty"`
}

// Platform is the OS forged itself runs on.
type Platform struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	Supported bool   `json:"supported"`
}

// EngineFacts identify the Docker engine that answered.
type EngineFacts struct {
	Endpoint        string `json:"endpoint,omitempty"`
	Reachable       bool   `json:"reachable"`
	OSType          string `json:"osType,omitempty"`
	Linux           bool   `json:"linux"`
	APIVersion      string `json:"apiVersion,omitempty"`
	MinAPIVersion   string `json:"minApiVersion,omitempty"`
	ServerVersion   string `json:"serverVersion,omitempty"`
	OperatingSystem string `json:"operatingSystem,omitempty"`
	KernelVersion   string `json:"kernelVersion,omitempty"`
	Architecture    string `json:"architecture,omitempty"`
	DockerRootDir   string `json:"dockerRootDir,omitempty"`
	NCPU            int    `json:"ncpu,omitempty"`
	MemTotalBytes   int64  `json:"memTotalBytes,omitempty"`
}

// Slots is the number of attempts the host admits now: Capacity when
// available, else 0. Attempts already running are not affected by a
// smaller number; the caller drains down to it.
func (r Report) Slots() int {
	if !r.Available {
		return 0
	}
	return r.Capacity
}

// MaintenanceAllowed reports whether Docker maintenance (reaping, GC) may
// run: when available and under the capacity-low codes.
func (r Report) MaintenanceAllowed() bool {
	return r.Available || MaintenanceAllowedFor(r.Code)
}

// Err is nil when the host is available, else a *failure.Error with the
// report's code and reason, ready to refuse an admission with.
func (r Report) Err() error {
	if r.Available {
		return nil
	}
	return failure.New(r.Code, "%s", r.Reason)
}
