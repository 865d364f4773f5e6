package imagepolicy

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// In-toto and SLSA names.
const (
	// PayloadType is the DSSE payload type of an in-toto statement.
	PayloadType   = "application/vnd.in-toto+json"
	StatementType = "https://in-toto.io/Statement/v1"
	PredicateType = "https://slsa.dev/provenance/v1"
	// BuildType names forged's two-stage sandbox image build.
	BuildType = "https://github.com/forgedev/forged/sandbox-image/v1"
	// BuilderID names forged as the builder.
	BuilderID = "https://github.com/forgedev/forged"
)

// Digest is an in-toto digest set: algorithm to lowercase hex.
type Digest map[string]string

// ResourceDescriptor is an in-toto resource: a name and its digests.
type ResourceDescriptor struct {
	Name        string         `json:"name,omitempty"`
	URI         string         `json:"uri,omitempty"`
	Digest      Digest         `json:"digest"`
	Annotations map[string]any `json:"annotations,omitempty"`
}

// Statement is an in-toto Statement v1 with a SLSA provenance v1 predicate.
type Statement struct {
	Type          string               `json:"_type"`
	Subject       []ResourceDescriptor `json:"subject"`
	PredicateType string               `json:"predicateType"`
	Predicate     Provenance           `json:"predicate"`
}

// Provenance is the SLSA provenance v1 predicate.
type Provenance struct {
	BuildDefinition BuildDefinition `json:"buildDefinition"`
	RunDetails      RunDetails      `json:"runDetails"`
}

// BuildDefinition is what was built, from what.
type BuildDefinition struct {
	BuildType            string               `json:"buildType"`
	ExternalParameters   map[string]any       `json:"externalParameters"`
	InternalParameters   map[string]any       `json:"internalParameters,omitempty"`
	ResolvedDependencies []ResourceDescriptor `json:"resolvedDependencies"`
}

// RunDetails is who built it, when, and what else came out.
type RunDetails struct {
	Builder    Builder              `json:"builder"`
	Metadata   RunMetadata          `json:"metadata"`
	Byproducts []ResourceDescriptor `json:"byproducts,omitempty"`
}

// Builder names the builder and its version.
type Builder struct {
	ID      string            `json:"id"`
	Version map[string]string `json:"version,omitempty"`
}

// RunMetadata is the build's invocation and times.
type RunMetadata struct {
	InvocationID string    `json:"invocationId"`
	StartedOn    time.Time `json:"startedOn"`
	FinishedOn   time.Time `json:"finishedOn"`
}

// Inputs are an image's build inputs, as the provenance lists them.
// Digests are "sha256:<hex>" or bare hex; the config commit is a git
// object name.
type Inputs struct {
	ImageRef, ImageID string // the agent image's tag and id
	ProjectImageID    string
	Key               string // the image cache key
	AttemptID         string
	Project           string
	ExecutionPolicy   string
	ConfigCommit      string
	ContextDigest     string
	ContractDigest    string
	DockerfileDigest  string
	// BaseImages are the upstream images (FROM, COPY --from), reference to
	// local image id.
	BaseImages map[string]string
	// WorkerDigest is the forged-worker binary baked into the overlay.
	WorkerDigest   string
	BuilderVersion string
	Limits         map[string]any
	Byproducts     []ResourceDescriptor // the build log, the SBOM
	Started        time.Time
	Finished       time.Time
}

// NewStatement builds the provenance statement of an image.
func NewStatement(in Inputs) Statement {
	deps := []ResourceDescriptor{}
	add := func(name, algo, value string) {
		if value == "" {
			return
		}
		deps = append(deps, ResourceDescriptor{Name: name, Digest: Digest{algo: strings.TrimPrefix(value, algo+":")}})
	}
	add("sandbox-config-commit", "gitCommit", in.ConfigCommit)
	add("build-context", "sha256", in.ContextDigest)
	add("sandbox-contract", "sha256", in.ContractDigest)
	add(".forge/Dockerfile", "sha256", in.DockerfileDigest)
	for _, ref := range sortedKeys(in.BaseImages) {
		add(ref, "sha256", in.BaseImages[ref])
	}
	add("forged-worker", "sha256", in.WorkerDigest)
	add("project-image", "sha256", in.ProjectImageID)
	version := map[string]string{"forged": in.BuilderVersion}
	return Statement{
		Type:          StatementType,
		Subject:       []ResourceDescriptor{{Name: in.ImageRef, Digest: Digest{"sha256": strings.TrimPrefix(in.ImageID, "sha256:")}}},
		PredicateType: PredicateType,
		Predicate: Provenance{
			BuildDefinition: BuildDefinition{
				BuildType: BuildType,
				ExternalParameters: map[string]any{
					"project": in.Project, "executionPolicy": in.ExecutionPolicy, "cacheKey": in.Key,
				},
				InternalParameters:   map[string]any{"builder": "classic", "limits": in.Limits},
				ResolvedDependencies: deps,
			},
			RunDetails: RunDetails{
				Builder:    Builder{ID: BuilderID, Version: version},
				Metadata:   RunMetadata{InvocationID: in.AttemptID, StartedOn: in.Started.UTC(), FinishedOn: in.Finished.UTC()},
				Byproducts: in.Byproducts,
			},
		},
	}
}

// Signer signs provenance with the operator's ed25519 key.
type Signer struct {
	key   ed25519.PrivateKey
	keyID string
}

// LoadSigner reads an ed25519 private key in PKCS #8 PEM ("PRIVATE KEY",
// as `openssl genpkey -algorithm ed25519` writes it). The file must not be
// readable by group or others.
func LoadSigner(path string) (*Signer, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--image-provenance-key: %w", err)
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("--image-provenance-key %s must be a regular file readable by its owner only (mode 0600 or stricter)", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--image-provenance-key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("--image-provenance-key %s holds no PKCS #8 PEM private key; create one with openssl genpkey -algorithm ed25519", path)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("--image-provenance-key %s: %w", path, err)
	}
	key, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("--image-provenance-key %s is not an ed25519 key", path)
	}
	return NewSigner(key)
}

// NewSigner signs with key; its key id is the SHA-256 of the public key's
// PKIX DER encoding, in hex.
func NewSigner(key ed25519.PrivateKey) (*Signer, error) {
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &Signer{key: key, keyID: hex.EncodeToString(sum[:])}, nil
}

// Sign implements dsse.Signer: data is the PAE.
func (s *Signer) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(s.key, data), nil
}

// KeyID implements dsse.Signer.
func (s *Signer) KeyID() (string, error) { return s.keyID, nil }

// Public returns the public key.
func (s *Signer) Public() crypto.PublicKey { return s.key.Public() }

// Verify implements dsse.Verifier.
func (s *Signer) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(s.key.Public().(ed25519.PublicKey), data, sig) {
		return errors.New("ed25519: invalid signature")
	}
	return nil
}

// PublicKeyPEM is the public key in PKIX PEM, for `openssl pkeyutl`.
func (s *Signer) PublicKeyPEM() []byte {
	der, _ := x509.MarshalPKIXPublicKey(s.key.Public())
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// SignStatement encodes the statement and wraps it in a DSSE envelope
// signed over DSSE's PAE. It returns the envelope's JSON.
func (s *Signer) SignStatement(ctx context.Context, st Statement) ([]byte, error) {
	payload, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	es, err := dsse.NewEnvelopeSigner(s)
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(ctx, PayloadType, payload)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(env, "", "  ")
}

// VerifyEnvelope checks that the envelope's signature is this key's over
// the PAE and returns the statement it carries.
func (s *Signer) VerifyEnvelope(ctx context.Context, data []byte) (Statement, error) {
	var env dsse.Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return Statement{}, fmt.Errorf("provenance envelope: %w", err)
	}
	if env.PayloadType != PayloadType {
		return Statement{}, fmt.Errorf("provenance envelope: payload type %q is not %q", clip(env.PayloadType, 60), PayloadType)
	}
	ev, err := dsse.NewEnvelopeVerifier(s)
	if err != nil {
		return Statement{}, err
	}
	if _, err := ev.Verify(ctx, &env); err != nil {
		return Statement{}, fmt.Errorf("provenance envelope: %w", err)
	}
	payload, err := env.DecodeB64Payload()
	if err != nil {
		return Statement{}, fmt.Errorf("provenance envelope: %w", err)
	}
	var st Statement
	if err := json.Unmarshal(payload, &st); err != nil {
		return Statement{}, fmt.Errorf("provenance statement: %w", err)
	}
	return st, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
