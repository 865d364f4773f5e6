package reaper

// buildCgroups removes the cgroup parents of image builds (--build-pids)
// that a dead forged process of this runner left: those named after this
// runner, held by no build of this process, and empty of processes and
// child cgroups in every hierarchy (cgroups.BuildCgroups.Reap). A build
// is not an attempt: its cgroup's liveness is the build's, not the
// attempt's, so Config.Live does not apply. A dry run lists them.
func (s *sweep) buildCgroups() {
	if s.cfg.BuildCgroups == nil {
		return
	}
	got, err := s.cfg.BuildCgroups.Reap(s.cfg.DryRun)
	s.round.BuildCgroups = &got
	if err != nil {
		s.errs = append(s.errs, err)
	}
}
