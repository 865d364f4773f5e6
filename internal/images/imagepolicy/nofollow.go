package imagepolicy

import "syscall"

const oNoFollow = syscall.O_NOFOLLOW
