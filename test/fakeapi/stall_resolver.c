/*
 * stall_resolver.c: an LD_PRELOAD shim that makes name lookups of one test
 * domain stall, as a resolver whose nameserver never answers does (glibc
 * then waits its timeout x attempts, 5 s x 2 per nameserver by default:
 * resolv.conf(5)).  Lookups of names ending in ".kwatch-stall.invalid"
 * sleep KWATCH_STALL_RESOLVER_S seconds (default 60) and then fail with
 * EAI_AGAIN ("Temporary failure in name resolution"); every other name is
 * resolved by the real getaddrinfo.  Used by test_fleet.py to check that a
 * lookup that stalls holds up no other server's watches: libcurl's threaded
 * resolver runs getaddrinfo in a thread of its own (lib/asyn-thrdd.c), and
 * the worker must not wait for that thread.
 *
 *   gcc -shared -fPIC -O2 -o stall_resolver.so stall_resolver.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STALL_SUFFIX ".kwatch-stall.invalid"

typedef int (*getaddrinfo_fn) (const char *, const char *,
							   const struct addrinfo *, struct addrinfo **);

int
getaddrinfo(const char *node, const char *service,
			const struct addrinfo *hints, struct addrinfo **res)
{
	static getaddrinfo_fn real;
	size_t		n = node ? strlen(node) : 0;
	size_t		s = strlen(STALL_SUFFIX);

	if (n > s && strcmp(node + n - s, STALL_SUFFIX) == 0)
	{
		const char *env = getenv("KWATCH_STALL_RESOLVER_S");
		unsigned	seconds = env ? (unsigned) atoi(env) : 60;

		sleep(seconds);
		return EAI_AGAIN;
	}
	if (real == NULL)
		real = (getaddrinfo_fn) dlsym(RTLD_NEXT, "getaddrinfo");
	return real(node, service, hints, res);
}
