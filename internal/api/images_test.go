package api

import "testing"

// TestImageRunRefusal: the one refusal of an image no new job or
// workload may run keeps the texts the job and workload paths gave, a
// job's naming its job.yaml field; a verified, promoted image is not
// refused.
func TestImageRunRefusal(t *testing.T) {
	tests := []struct {
		name      string
		what      string
		lifecycle string
		trust     string
		want      string
	}{
		{"runnable job", "job", ImagePromoted, TrustVerified, ""},
		{"runnable workload", "workload", ImagePromoted, TrustVerified, ""},
		{"revoked job", "job", ImagePromoted, TrustRevoked, "image: tiny (img-1) is revoked: no new job runs it"},
		{"revoked workload", "workload", ImagePromoted, TrustRevoked, "image tiny (img-1) is revoked: no new workload runs it"},
		{"failed job", "job", ImagePromoted, TrustFailedVerification,
			"image: tiny (img-1) is failed_verification, not verified: a job runs only verified images"},
		{"unverified workload", "workload", ImagePromoted, TrustUnverified,
			"image tiny (img-1) is unverified, not verified: a workload runs only verified images"},
		{"retired job", "job", ImageRetired, TrustVerified, "image: tiny (img-1) is retired, not promoted: a job runs only promoted images"},
		{"published workload", "workload", ImagePublished, TrustVerified,
			"image tiny (img-1) is published, not promoted: a workload runs only promoted images"},
		{"revoked and retired", "job", ImageRetired, TrustRevoked, "image: tiny (img-1) is revoked: no new job runs it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Image{ID: "img-1", Name: "tiny", Lifecycle: tt.lifecycle, Trust: tt.trust}.RunRefusal(tt.what)
			got := ""
			if err != nil {
				got = err.Error()
				if CodeOf(err) != CodeInvalidArgument {
					t.Errorf("code %s; want %s", CodeOf(err), CodeInvalidArgument)
				}
			}
			if got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}
