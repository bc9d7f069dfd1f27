/*
 * evstream: a minimal Kubernetes API server that replays pre-encoded watch
 * events as fast as asked (issue 10, item 2; driven by evstream.py).
 *
 *   evstream FIXTURES_DIR OBJECTS OBJECT_BYTES
 *
 * Serves plain http on 127.0.0.1 (port printed as "port N" on stdout):
 * the discovery documents /version, /api, /api/v1, /apis from FIXTURES_DIR
 * (test/fixtures/kube-apiserver-1.20), a LIST of OBJECTS ConfigMaps
 * evb-000000... in namespace evbench (one page: limit is ignored), each
 * about OBJECT_BYTES of JSON, and WATCHes of configmaps that stay open
 * (BOOKMARK every 30 s while idle) until a command on stdin makes the
 * newest one stream:
 *
 *   run RATE COUNT FILE   COUNT MODIFIED events (event j modifies object
 *                         j % OBJECTS) at RATE events/s (0: as fast as the
 *                         socket takes them), each its own HTTP chunk, as
 *                         many as are due written with one write(); every
 *                         event carries its send time (CLOCK_REALTIME ns,
 *                         taken just before the write) in the annotation
 *                         kwatch.io/sent, and a new resourceVersion.
 *                         Writes (resourceVersion, sent ns) pairs, int64
 *                         native order, to FILE; answers
 *                         "done SENT SECONDS" (or "error ...").
 *   quit
 *
 * The events are encoded once: each object's framed event (chunk header,
 * JSON, CRLF) is a template whose fixed-width resourceVersion and timestamp
 * are overwritten in place, so sending costs a memcpy and a write.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RV_W 12
#define TS_W 19
#define RV_BASE 100000000000LL	/* 12 digits: fixed width for any run */
#define MAX_BATCH 64

typedef struct
{
	char	   *buf;			/* framed event */
	size_t		len;
	size_t		rv_off,
				ts_off;
} Tmpl;

static const char *fixtures;
static int	nobj;
static int	objbytes;
static Tmpl *tmpl;
static int64_t rv_counter;		/* last resourceVersion handed out */
static int64_t *obj_rv;			/* each object's current resourceVersion */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static unsigned watch_gen;		/* newest watch; 0 = none yet */
static int	watch_alive;
static int	job_pending,
			job_done;
static double job_rate;
static long job_count;
static char job_file[4096];
static long job_sent;
static double job_secs;
static char job_err[4400];

static int64_t
now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static char *
slurp(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	char	   *b;
	long		n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc(n + 1);
	if (fread(b, 1, n, f) != (size_t) n)
		n = 0;
	b[n] = 0;
	fclose(f);
	*len = n;
	return b;
}

static int
write_all(int fd, const char *p, size_t n)
{
	while (n > 0)
	{
		ssize_t		w = write(fd, p, n);

		if (w < 0)
		{
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= w;
	}
	return 0;
}

/* the object's JSON; RV and TS as given (placeholders for templates) */
static char *
object_json(int i, const char *rv, const char *ts, int with_kind)
{
	size_t		cap = objbytes + 2048;
	char	   *s = malloc(cap);
	int			n;

	n = snprintf(s, cap,
				 "{%s\"metadata\":{\"name\":\"evb-%06d\",\"namespace\":\"evbench\","
				 "\"uid\":\"6b1d2c3e-0000-4000-8000-%012d\",\"resourceVersion\":\"%s\","
				 "\"creationTimestamp\":\"2026-01-01T00:00:00Z\","
				 "\"labels\":{\"app\":\"evbench\",\"shard\":\"s%d\"},"
				 "\"annotations\":{\"kwatch.io/sent\":\"%s\"}},\"data\":{",
				 with_kind ? "\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\"," : "",
				 i, i, rv, i % 16, ts);
	/* data entries of 64 characters until the object is about objbytes */
	for (int k = 0; n < objbytes - 80; k++)
		n += snprintf(s + n, cap - n, "%s\"key-%03d\":\"%064d\"", k ? "," : "", k, i);
	n += snprintf(s + n, cap - n, "}}");
	return s;
}

static void
build_templates(void)
{
	char		rvp[RV_W + 1],
				tsp[TS_W + 1];

	memset(rvp, '#', RV_W);
	rvp[RV_W] = 0;
	memset(tsp, '@', TS_W);
	tsp[TS_W] = 0;
	tmpl = calloc(nobj, sizeof(Tmpl));
	obj_rv = calloc(nobj, sizeof(int64_t));
	for (int i = 0; i < nobj; i++)
	{
		char	   *o = object_json(i, rvp, tsp, 1);
		size_t		jl = strlen(o) + strlen("{\"type\":\"MODIFIED\",\"object\":}\n");
		size_t		cap = jl + 32;
		char	   *b = malloc(cap);
		int			h = snprintf(b, cap, "%zx\r\n", jl);

		snprintf(b + h, cap - h, "{\"type\":\"MODIFIED\",\"object\":%s}\n\r\n", o);
		tmpl[i].buf = b;
		tmpl[i].len = h + jl + 2;
		tmpl[i].rv_off = strstr(b, rvp) - b;
		tmpl[i].ts_off = strstr(b, tsp) - b;
		free(o);
		obj_rv[i] = RV_BASE + i;
	}
	rv_counter = RV_BASE + nobj;
}

static void
put_digits(char *dst, int64_t v, int w)
{
	for (int k = w - 1; k >= 0; k--)
	{
		dst[k] = '0' + (v % 10);
		v /= 10;
	}
}

static void
send_simple(int fd, int code, const char *body, size_t len)
{
	char		h[256];
	int			n = snprintf(h, sizeof(h),
							 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
							 "Content-Length: %zu\r\n\r\n",
							 code, code == 200 ? "OK" : "Not Found", len);

	write_all(fd, h, n);
	write_all(fd, body, len);
}

static void
serve_list(int fd)
{
	size_t		cap = (size_t) nobj * (objbytes + 512) + 1024,
				n;
	char	   *b = malloc(cap);
	char		rv[32],
				ts[32];

	pthread_mutex_lock(&mu);
	n = snprintf(b, cap, "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\","
				 "\"metadata\":{\"resourceVersion\":\"%lld\"},\"items\":[",
				 (long long) rv_counter);
	for (int i = 0; i < nobj; i++)
	{
		char	   *o;

		snprintf(rv, sizeof(rv), "%lld", (long long) obj_rv[i]);
		put_digits(ts, 0, TS_W);
		ts[TS_W] = 0;
		o = object_json(i, rv, ts, 0);
		n += snprintf(b + n, cap - n, "%s%s", i ? "," : "", o);
		free(o);
	}
	pthread_mutex_unlock(&mu);
	n += snprintf(b + n, cap - n, "]}");
	send_simple(fd, 200, b, n);
	free(b);
}

static int
client_gone(int fd)
{
	struct pollfd p = {.fd = fd,.events = POLLIN};
	char		c;

	if (poll(&p, 1, 0) <= 0)
		return 0;
	return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

/* one job on watch connection fd; mu not held */
static void
run_job(int fd, double rate, long count, const char *file)
{
	int64_t    *out = malloc(sizeof(int64_t) * 2 * (count + 1));
	char	   *buf = malloc(MAX_BATCH * (tmpl[0].len + 64));
	long		sent = 0;
	int64_t		t0 = now_ns(CLOCK_MONOTONIC);
	int			err = 0;

	while (sent < count)
	{
		long		n;
		size_t		len = 0;
		int64_t		stamp;

		if (rate > 0)
		{
			int64_t		now = now_ns(CLOCK_MONOTONIC);
			long		due = (long) ((double) (now - t0) * rate / 1e9) + 1;

			if (due > count)
				due = count;
			n = due - sent;
			if (n <= 0)
			{
				int64_t		next = t0 + (int64_t) (sent * 1e9 / rate);
				struct timespec ts = {0, next - now > 0 ? next - now : 1000};

				nanosleep(&ts, NULL);
				continue;
			}
		}
		else
			n = count - sent;
		if (n > MAX_BATCH)
			n = MAX_BATCH;
		stamp = now_ns(CLOCK_REALTIME);
		pthread_mutex_lock(&mu);
		for (long k = 0; k < n; k++)
		{
			int			i = (int) ((sent + k) % nobj);
			Tmpl	   *t = &tmpl[i];
			int64_t		rv = ++rv_counter;

			memcpy(buf + len, t->buf, t->len);
			put_digits(buf + len + t->rv_off, rv, RV_W);
			put_digits(buf + len + t->ts_off, stamp, TS_W);
			len += t->len;
			obj_rv[i] = rv;
			out[2 * (sent + k)] = rv;
			out[2 * (sent + k) + 1] = stamp;
		}
		pthread_mutex_unlock(&mu);
		if (write_all(fd, buf, len) < 0)
		{
			err = errno;
			break;
		}
		sent += n;
	}
	job_secs = (now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
	job_sent = sent;
	job_err[0] = 0;
	if (err)
		snprintf(job_err, sizeof(job_err), "write: %s", strerror(err));
	{
		FILE	   *f = fopen(file, "wb");

		if (f)
		{
			fwrite(out, sizeof(int64_t) * 2, sent, f);
			fclose(f);
		}
		else
			snprintf(job_err, sizeof(job_err), "cannot write %s", file);
	}
	free(out);
	free(buf);
}

static void
serve_watch(int fd)
{
	static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
		"Transfer-Encoding: chunked\r\n\r\n";
	unsigned	gen;
	int64_t		last = now_ns(CLOCK_MONOTONIC);

	if (write_all(fd, head, sizeof(head) - 1) < 0)
		return;
	pthread_mutex_lock(&mu);
	gen = ++watch_gen;
	watch_alive = 1;
	pthread_cond_broadcast(&cv);
	for (;;)
	{
		struct timespec until;

		if (watch_gen != gen)
			break;
		if (job_pending)
		{
			job_pending = 0;
			pthread_mutex_unlock(&mu);
			run_job(fd, job_rate, job_count, job_file);
			pthread_mutex_lock(&mu);
			job_done = 1;
			pthread_cond_broadcast(&cv);
			last = now_ns(CLOCK_MONOTONIC);
			continue;
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		pthread_cond_timedwait(&cv, &mu, &until);
		pthread_mutex_unlock(&mu);
		if (client_gone(fd))
		{
			pthread_mutex_lock(&mu);
			break;
		}
		if (now_ns(CLOCK_MONOTONIC) - last > 30000000000LL)
		{
			char		ev[256],
						ch[300];
			int			n,
						m;

			pthread_mutex_lock(&mu);
			n = snprintf(ev, sizeof(ev), "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\","
						 "\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"%lld\"}}}\n",
						 (long long) rv_counter);
			pthread_mutex_unlock(&mu);
			m = snprintf(ch, sizeof(ch), "%x\r\n%s\r\n", n, ev);
			if (write_all(fd, ch, m) < 0)
			{
				pthread_mutex_lock(&mu);
				break;
			}
			last = now_ns(CLOCK_MONOTONIC);
		}
		pthread_mutex_lock(&mu);
	}
	if (watch_gen == gen)
		watch_alive = 0;
	pthread_mutex_unlock(&mu);
}

static void *
conn_main(void *arg)
{
	int			fd = (int) (intptr_t) arg;
	char		req[16384];
	size_t		have = 0;
	int			one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (;;)
	{
		char	   *end,
				   *sp,
				   *path;
		ssize_t		r;
		size_t		used;

		while ((end = memmem(req, have, "\r\n\r\n", 4)) == NULL)
		{
			if (have == sizeof(req))
				goto out;
			r = read(fd, req + have, sizeof(req) - have);
			if (r <= 0)
				goto out;
			have += r;
		}
		used = end + 4 - req;
		*end = 0;
		/* "GET /path?query HTTP/1.1" */
		sp = strchr(req, ' ');
		if (!sp)
			goto out;
		path = sp + 1;
		sp = strchr(path, ' ');
		if (sp)
			*sp = 0;
		{
			char	   *q = strchr(path, '?');
			char	   *query = q ? q + 1 : "";
			static const char *disc[][2] = {{"/version", "version.json"}, {"/api", "api.json"},
			{"/api/v1", "api_v1.json"}, {"/apis", "apis.json"}};
			int			done = 0;

			if (q)
				*q = 0;
			for (int i = 0; i < 4 && !done; i++)
				if (strcmp(path, disc[i][0]) == 0)
				{
					char		p[4096];
					size_t		len;
					char	   *b;

					snprintf(p, sizeof(p), "%s/%s", fixtures, disc[i][1]);
					b = slurp(p, &len);
					if (b)
						send_simple(fd, 200, b, len);
					else
						send_simple(fd, 404, "{}", 2);
					free(b);
					done = 1;
				}
			if (!done && (strcmp(path, "/api/v1/configmaps") == 0 ||
						  strcmp(path, "/api/v1/namespaces/evbench/configmaps") == 0))
			{
				if (strstr(query, "watch=true") || strstr(query, "watch=1"))
				{
					serve_watch(fd);
					goto out;	/* a watch ends its connection */
				}
				serve_list(fd);
				done = 1;
			}
			if (!done)
			{
				static const char nf[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
					"\"status\":\"Failure\",\"message\":\"the server could not find the requested resource\","
					"\"reason\":\"NotFound\",\"details\":{},\"code\":404}";

				send_simple(fd, 404, nf, sizeof(nf) - 1);
			}
		}
		memmove(req, req + used, have - used);
		have -= used;
	}
out:
	close(fd);
	return NULL;
}

static void *
accept_main(void *arg)
{
	int			ls = (int) (intptr_t) arg;

	for (;;)
	{
		int			fd = accept(ls, NULL, NULL);
		pthread_t	t;

		if (fd < 0)
			continue;
		pthread_create(&t, NULL, conn_main, (void *) (intptr_t) fd);
		pthread_detach(t);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	int			ls,
				one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t	al = sizeof(a);
	pthread_t	t;
	char		line[8192];

	if (argc != 4)
	{
		fprintf(stderr, "usage: evstream FIXTURES_DIR OBJECTS OBJECT_BYTES\n");
		return 2;
	}
	fixtures = argv[1];
	nobj = atoi(argv[2]);
	objbytes = atoi(argv[3]);
	if (nobj < 1 || objbytes < 300)
	{
		fprintf(stderr, "evstream: OBJECTS >= 1, OBJECT_BYTES >= 300\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	build_templates();
	ls = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(ls, (struct sockaddr *) &a, sizeof(a)) < 0 || listen(ls, 64) < 0)
	{
		perror("evstream: bind");
		return 1;
	}
	getsockname(ls, (struct sockaddr *) &a, &al);
	printf("port %d event_bytes %zu\n", ntohs(a.sin_port), tmpl[0].len);
	fflush(stdout);
	pthread_create(&t, NULL, accept_main, (void *) (intptr_t) ls);

	while (fgets(line, sizeof(line), stdin))
	{
		double		rate;
		long		count;
		char		file[4096];

		if (strncmp(line, "quit", 4) == 0)
			break;
		if (sscanf(line, "run %lf %ld %4095s", &rate, &count, file) != 3)
		{
			printf("error bad command\n");
			fflush(stdout);
			continue;
		}
		pthread_mutex_lock(&mu);
		{
			struct timespec until;

			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 60;
			while (!watch_alive)
				if (pthread_cond_timedwait(&cv, &mu, &until) == ETIMEDOUT)
					break;
		}
		if (!watch_alive)
		{
			pthread_mutex_unlock(&mu);
			printf("error no watch open\n");
			fflush(stdout);
			continue;
		}
		job_rate = rate;
		job_count = count;
		snprintf(job_file, sizeof(job_file), "%s", file);
		job_done = 0;
		job_pending = 1;
		pthread_cond_broadcast(&cv);
		while (!job_done)
			pthread_cond_wait(&cv, &mu);
		pthread_mutex_unlock(&mu);
		if (job_err[0])
			printf("error %s (sent %ld)\n", job_err, job_sent);
		else
			printf("done %ld %.6f\n", job_sent, job_secs);
		fflush(stdout);
	}
	return 0;
}
