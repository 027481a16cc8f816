// Whether this build runs under AddressSanitizer (`make test-sanitize`, HARRIER_SANITIZE): GCC
// defines __SANITIZE_ADDRESS__, Clang answers __has_feature(address_sanitizer). Code that ASan
// must see through (pooled memory, a signal handler of our own, a counting operator new) asks
// here.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define HARRIER_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HARRIER_UNDER_ASAN 1
#endif
#endif
#ifndef HARRIER_UNDER_ASAN
#define HARRIER_UNDER_ASAN 0
#endif

namespace harrier {

inline constexpr bool kUnderAddressSanitizer = HARRIER_UNDER_ASAN != 0;

}  // namespace harrier
