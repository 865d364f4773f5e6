package actors

import (
	"context"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/images/dockerfile"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/messages"
)

// signatureWarning is an upstream image adoption uses unverified.
type signatureWarning struct {
	image  string
	line   int
	reason string
}

// errNoVerifier is the reason without a verification command.
const noVerifier = "no image verification command is configured"

// verifyUpstreamImages runs the image-signature hook for every image the
// Dockerfile starts from (FROM and COPY --from that are not stages or
// scratch). Under sandbox_required each must verify, or the attempt is
// refused with sandbox_image_signature_invalid naming the line; under
// adoption the unverified ones are returned as warnings. A Dockerfile that
// does not parse is left to the build policy, which refuses it.
func verifyUpstreamImages(ctx context.Context, v ImageVerifier, src []byte, policy string) ([]signatureWarning, error) {
	file, err := dockerfile.Parse(src)
	if err != nil {
		return nil, nil
	}
	required := policy == messages.PolicySandboxRequired
	var warnings []signatureWarning
	for _, img := range file.UpstreamImages() {
		reason := noVerifier
		if v != nil {
			err := v.Verify(ctx, img.Ref)
			if err == nil {
				continue
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			reason = err.Error()
		}
		if required {
			return nil, failure.New(failure.SandboxImageSignature, "Dockerfile line %d: the image %q is not verified: %s", img.Line, img.Ref, reason)
		}
		warnings = append(warnings, signatureWarning{image: img.Ref, line: img.Line, reason: reason})
	}
	return warnings, nil
}

// verifyServiceImages runs the image-signature hook for the declared
// services' catalogue images (the seed's verifyCatalogImage), by the same
// rule as the upstream images: under sandbox_required each must verify, or
// the attempt is refused with sandbox_image_signature_invalid naming the
// service; under adoption the unverified ones are returned as warnings
// (line 0).
func verifyServiceImages(ctx context.Context, v ImageVerifier, declared []string, images map[string]services.Entry, policy string) ([]signatureWarning, error) {
	var warnings []signatureWarning
	for _, s := range declared {
		ref := images[s].Ref
		reason := noVerifier
		if v != nil {
			err := v.Verify(ctx, ref)
			if err == nil {
				continue
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			reason = err.Error()
		}
		if policy == messages.PolicySandboxRequired {
			return nil, failure.New(failure.SandboxImageSignature, "service %s: the catalogue image %q is not verified: %s", s, ref, reason)
		}
		warnings = append(warnings, signatureWarning{image: ref, reason: reason})
	}
	return warnings, nil
}
