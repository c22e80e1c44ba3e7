/*
 * floor: the least a client can do per HTTP/1.1 response, to measure loadlens against
 * (bench/vs-peers compiles it with gcc -O2 at bench time; nothing built is kept).
 *
 * One thread, C connections, one request in flight on each, io_uring (liburing) with
 * batched waits: one io_uring_enter per loop submits everything queued and waits for a
 * quarter of the connections' completions (at most 1 ms; -H waits as loadlens does). No clock
 * read per response, no latency, no timestamps (but see -T): only what every client must do.
 *
 *   keep-alive, small body (default): a multishot receive armed once per connection
 *     into a ring of provided buffers; per response one send (no completion unless it
 *     fails) and one or more receive completions, the head found and its Content-Length
 *     read, the body counted past.
 *   keep-alive, large body (-t): per response a send, a one-shot receive of at most
 *     HEAD bytes (-h, 4096) into the connection's own buffer, then a receive with
 *     MSG_TRUNC of the rest of the Content-Length body (another if it ends short):
 *     discarded unread by the kernel, counted by its length.
 *   N requests per connection (-r N): socket(), then connect, send and the multishot
 *     receive linked in one submission (connect and send post no completion when they
 *     succeed); the last request says `Connection: close`, the server closes first, the
 *     receive's end of stream is the cue to close through the ring and open again.
 *
 * Timestamps as loadlens takes them (-T): SO_TIMESTAMPNS on every socket and every
 * receive in its recvmsg form, with room for one SCM_TIMESTAMPNS control message: the
 * multishot receive becomes a multishot recvmsg into the same provided buffers (the
 * kernel writes a header and the control message before the bytes), the -t head and
 * discard receives one-shot recvmsgs with the connection's own msghdr. The arrival time
 * of each completion is read from its control message and folded into a checksum, nothing
 * more (no clock, no latency): the floor for a client whose arrival times come from the
 * kernel. Then a second line, on stderr: `timestamps N checksum X`.
 *
 * Every response is counted exactly: its head must begin `HTTP/1.1 200 ` (else it is
 * counted as not OK) and carry Content-Length; a response still incomplete when the time
 * is up is not counted. Output, one line on stdout:
 *   responses N ok N bytes B errors E seconds S
 * (bytes: heads plus Content-Length bodies). Exit 1 on a set-up error.
 *
 * The wait (-H US): by default each wait is for a quarter of the connections' completions
 * (at most 1 ms). With -H, as loadlens waits: for as many as arrived in US µs at the rate
 * of the last 20 ms, at most a quarter, at least one — a client that bounds how long a
 * response is held (and its connection idle for the server) wakes more often when the
 * server is slower.
 *
 * Usage: floor -p PORT -u PATH [-a 127.0.0.1] [-c 50] [-d 4] [-r N] [-t] [-h 4096] [-T]
 *              [-H HOLD_US]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { OP_CONNECT = 1, OP_SEND, OP_RECV, OP_HEAD, OP_TRUNC, OP_CLOSE };

#define HEAD_MAX 8192
#define BUF_SIZE 65536
#define IGNORED UINT64_MAX
#define CONTROL CMSG_SPACE(sizeof(struct timespec)) /* -T: one SCM_TIMESTAMPNS */

/* -T, -t: a one-shot recvmsg's message, with room for the arrival time. */
struct oneshot {
	struct msghdr msg;
	struct iovec iov;
	union {
		char buf[CONTROL];
		struct cmsghdr align;
	} control;
};

struct conn {
	int fd;
	uint32_t gen;
	uint32_t sent;      /* requests sent on this connection */
	int last;           /* the request in flight is the connection's last */
	int recv_armed;     /* a multishot receive is armed */
	int draining;       /* the last response is in: waiting for the server's FIN */
	uint64_t remaining; /* body bytes still to come; 0 = in a head */
	int in_body;
	int ok;             /* the response in flight is a 200 */
	uint64_t head_len;  /* the response's head length, for the byte count */
	uint32_t have;      /* bytes of an incomplete head in buf */
	char *buf;          /* HEAD_MAX bytes: an incomplete head (or -t: each head) */
	struct oneshot *os; /* -T -t: the message of the head's or the discard's receive */
};

static struct io_uring ring;
static struct conn *conns;
static int nconns;
static struct sockaddr_in addr;
static char req_keep[1024], req_last[1024];
static int len_keep, len_last;
static uint32_t per_conn; /* requests per connection, 0 = keep-alive */
static int trunc_mode;
static int stamp_mode; /* -T */
static struct msghdr mshot_msg; /* -T: the multishot recvmsg's: no name, one control message */
static uint64_t stamps, stamp_sum; /* -T: arrival times read, their sum in ns */
static uint32_t head_read = 4096;
static double hold_us; /* -H: the wait's bound, µs at the recent rate (0: a quarter always) */
static struct io_uring_buf_ring *br;
static char *bufs;
static unsigned nbufs, recycled;
static uint64_t responses, ok, bytes, errors;
static int stopping;

static uint64_t ud(int i, int op)
{
	return ((uint64_t)i << 32) | ((uint64_t)(conns[i].gen & 0xffffff) << 8) | (uint64_t)op;
}

static struct io_uring_sqe *sqe(void)
{
	struct io_uring_sqe *s;
	while (!(s = io_uring_get_sqe(&ring)))
		io_uring_submit(&ring);
	return s;
}

static void arm_recv(int i)
{
	struct io_uring_sqe *s = sqe();
	if (stamp_mode)
		io_uring_prep_recvmsg_multishot(s, conns[i].fd, &mshot_msg, 0);
	else
		io_uring_prep_recv_multishot(s, conns[i].fd, NULL, 0, 0);
	s->flags |= IOSQE_BUFFER_SELECT;
	s->buf_group = 0;
	io_uring_sqe_set_data64(s, ud(i, OP_RECV));
	conns[i].recv_armed = 1;
}

/* -T -t: the connection's one-shot recvmsg of at most n bytes into p (NULL: discarded). */
static void prep_oneshot(struct io_uring_sqe *s, int i, void *p, size_t n, unsigned flags)
{
	struct oneshot *o = conns[i].os;
	o->iov.iov_base = p;
	o->iov.iov_len = n;
	o->msg.msg_controllen = CONTROL;
	io_uring_prep_recvmsg(s, conns[i].fd, &o->msg, flags);
}

static void recv_head(int i)
{
	struct conn *c = &conns[i];
	struct io_uring_sqe *s = sqe();
	if (stamp_mode)
		prep_oneshot(s, i, c->buf + c->have, head_read - c->have, 0);
	else
		io_uring_prep_recv(s, c->fd, c->buf + c->have, head_read - c->have, 0);
	io_uring_sqe_set_data64(s, ud(i, OP_HEAD));
}

/*
 * The rest of the body, discarded unread. Without MSG_WAITALL: with it (io_uring retries a
 * short receive itself), connections stalled here for ~1 ms at a time and the throughput
 * fell to a third (Linux 6.18); a short discard is simply followed by another.
 */
static void discard(int i)
{
	struct io_uring_sqe *s = sqe();
	uint64_t n = conns[i].remaining > (1u << 30) ? (1u << 30) : conns[i].remaining;
	if (stamp_mode)
		prep_oneshot(s, i, NULL, n, MSG_TRUNC);
	else
		io_uring_prep_recv(s, conns[i].fd, NULL, n, MSG_TRUNC);
	io_uring_sqe_set_data64(s, ud(i, OP_TRUNC));
}

/* Queues the next request (and, with -t, its head's receive). */
static void send_request(int i, unsigned link_flags)
{
	struct conn *c = &conns[i];
	c->sent++;
	c->last = per_conn && c->sent >= per_conn;
	struct io_uring_sqe *s = sqe();
	io_uring_prep_send(s, c->fd, c->last ? req_last : req_keep, c->last ? len_last : len_keep,
			   MSG_NOSIGNAL | MSG_WAITALL);
	s->flags |= IOSQE_CQE_SKIP_SUCCESS | link_flags;
	io_uring_sqe_set_data64(s, ud(i, OP_SEND));
	if (trunc_mode)
		recv_head(i);
}

static void open_conn(int i)
{
	struct conn *c = &conns[i];
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		perror("socket");
		exit(1);
	}
	int one = 1;
	if (stamp_mode && setsockopt(c->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0) {
		perror("setsockopt SO_TIMESTAMPNS");
		exit(1);
	}
	c->gen++;
	c->sent = 0;
	c->in_body = 0;
	c->have = 0;
	c->draining = 0;
	c->recv_armed = 0;
	/* connect → send → receive, linked: one submission, no completion for the first two. */
	struct io_uring_sqe *s = sqe();
	io_uring_prep_connect(s, c->fd, (struct sockaddr *)&addr, sizeof addr);
	s->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(s, ud(i, OP_CONNECT));
	send_request(i, IOSQE_IO_LINK);
	if (!trunc_mode)
		arm_recv(i);
}

static void close_conn(int i)
{
	struct conn *c = &conns[i];
	if (c->fd < 0)
		return;
	if (c->recv_armed || trunc_mode) {
		struct io_uring_sqe *s = sqe();
		io_uring_prep_cancel_fd(s, c->fd, IORING_ASYNC_CANCEL_ALL);
		/* Hard link: the close follows even when there was nothing to cancel. */
		s->flags |= IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS;
		io_uring_sqe_set_data64(s, IGNORED);
	}
	struct io_uring_sqe *s = sqe();
	io_uring_prep_close(s, c->fd);
	s->flags |= IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(s, IGNORED);
	c->fd = -1;
	c->gen++;
	c->recv_armed = 0;
}

static void failed(int i)
{
	errors++;
	close_conn(i);
	if (!stopping)
		open_conn(i);
}

/* A response is complete: count it, then the next request (or wait for the FIN). */
static void done(int i)
{
	struct conn *c = &conns[i];
	responses++;
	ok += c->ok;
	bytes += c->head_len;
	c->in_body = 0;
	if (c->last) {
		c->draining = 1;
		return;
	}
	send_request(i, 0);
}

/* The head in h[0..len) (ending in CRLF CRLF): status and Content-Length. */
static int parse_head(int i, const char *h, size_t len)
{
	struct conn *c = &conns[i];
	if (len < 13 || memcmp(h, "HTTP/1.", 7) != 0)
		return -1;
	c->ok = memcmp(h + 8, " 200 ", 5) == 0;
	const char *p = h, *end = h + len;
	for (;;) {
		p = memchr(p, '\n', end - p);
		if (!p || end - p < 16)
			return -1;
		p++;
		if (strncasecmp(p, "content-length:", 15) == 0) {
			c->remaining = strtoull(p + 15, NULL, 10);
			c->head_len = len + c->remaining;
			return 0;
		}
	}
}

/* Bytes of the stream in p[0..n), small-body mode. */
static void feed(int i, const char *p, size_t n)
{
	struct conn *c = &conns[i];
	while (n > 0) {
		if (c->draining) {
			return; /* bytes after the last response: ignored, the FIN is next */
		}
		if (c->in_body) {
			uint64_t take = c->remaining < n ? c->remaining : n;
			c->remaining -= take;
			p += take;
			n -= take;
			if (c->remaining == 0)
				done(i);
			continue;
		}
		const char *e;
		size_t used;
		if (c->have == 0 && (e = memmem(p, n, "\r\n\r\n", 4))) {
			used = e + 4 - p;
			if (parse_head(i, p, used) < 0) {
				failed(i);
				return;
			}
		} else {
			size_t old = c->have;
			size_t take = n < HEAD_MAX - old ? n : HEAD_MAX - old;
			memcpy(c->buf + old, p, take);
			c->have += take;
			size_t from = old >= 3 ? old - 3 : 0;
			e = memmem(c->buf + from, c->have - from, "\r\n\r\n", 4);
			if (!e) {
				if (c->have == HEAD_MAX)
					failed(i);
				return;
			}
			used = e + 4 - c->buf - old;
			if (parse_head(i, c->buf, e + 4 - c->buf) < 0) {
				failed(i);
				return;
			}
			c->have = 0;
		}
		p += used;
		n -= used;
		c->in_body = 1;
		if (c->remaining == 0)
			done(i);
	}
}

/* -t: a head's receive brought n more bytes into c->buf. */
static void head_in(int i, size_t n)
{
	struct conn *c = &conns[i];
	c->have += n;
	const char *e = memmem(c->buf, c->have, "\r\n\r\n", 4);
	if (!e) {
		if (c->have >= head_read) {
			failed(i);
			return;
		}
		recv_head(i);
		return;
	}
	size_t hl = e + 4 - c->buf;
	if (parse_head(i, c->buf, hl) < 0 || c->have - hl > c->remaining) {
		failed(i);
		return;
	}
	c->remaining -= c->have - hl;
	c->have = 0;
	c->in_body = 1;
	if (c->remaining == 0)
		done(i);
	else
		discard(i);
}

/* -T: a control message; if it is the arrival time, folded into the checksum. */
static int take_stamp(struct cmsghdr *cm)
{
	struct timespec t;
	if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_TIMESTAMPNS)
		return 0;
	memcpy(&t, CMSG_DATA(cm), sizeof t);
	stamp_sum += (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
	stamps++;
	return 1;
}

/* -T -t: the arrival time a one-shot recvmsg left in the connection's message. */
static void oneshot_stamp(int i)
{
	struct msghdr *m = &conns[i].os->msg;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR(m, cm))
		if (take_stamp(cm))
			break;
}

/* The server closed the connection: the cue to open another after its last response,
 * a failure before it. */
static void stream_ended(int i)
{
	if (!conns[i].draining) {
		failed(i);
		return;
	}
	conns[i].recv_armed = 0;
	close_conn(i);
	if (!stopping)
		open_conn(i);
}

/*
 * -T: a multishot recvmsg's res bytes in buffer b: its header, the control message, then
 * the bytes of the stream. The end of the stream comes with a buffer too (no bytes, the
 * last completion), where a plain receive's has res 0 and none.
 */
static void mshot_in(int i, char *b, int res, unsigned cqe_flags)
{
	struct io_uring_recvmsg_out *o = io_uring_recvmsg_validate(b, res, &mshot_msg);
	if (!o) {
		failed(i);
		return;
	}
	for (struct cmsghdr *cm = io_uring_recvmsg_cmsg_firsthdr(o, &mshot_msg); cm;
	     cm = io_uring_recvmsg_cmsg_nexthdr(o, &mshot_msg, cm))
		if (take_stamp(cm))
			break;
	unsigned n = io_uring_recvmsg_payload_length(o, res, &mshot_msg);
	if (n > 0) {
		feed(i, io_uring_recvmsg_payload(o, &mshot_msg), n);
	} else if (!(cqe_flags & IORING_CQE_F_MORE)) {
		stream_ended(i);
	}
}

static void complete(struct io_uring_cqe *cqe)
{
	uint64_t d = io_uring_cqe_get_data64(cqe);
	int res = cqe->res;
	if (cqe->flags & IORING_CQE_F_BUFFER) {
		unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
		if (res > 0 && d != IGNORED) {
			int i = d >> 32;
			if (conns[i].fd >= 0 && (conns[i].gen & 0xffffff) == ((d >> 8) & 0xffffff)) {
				if (stamp_mode)
					mshot_in(i, bufs + (size_t)bid * BUF_SIZE, res, cqe->flags);
				else
					feed(i, bufs + (size_t)bid * BUF_SIZE, res);
			}
		}
		io_uring_buf_ring_add(br, bufs + (size_t)bid * BUF_SIZE, BUF_SIZE, bid,
				      io_uring_buf_ring_mask(nbufs), recycled++);
		if (!(cqe->flags & IORING_CQE_F_MORE) && d != IGNORED) {
			int i = d >> 32;
			if (conns[i].fd >= 0 && (conns[i].gen & 0xffffff) == ((d >> 8) & 0xffffff)) {
				conns[i].recv_armed = 0;
				arm_recv(i);
			}
		}
		return;
	}
	if (d == IGNORED)
		return;
	int i = d >> 32, op = d & 0xff;
	struct conn *c = &conns[i];
	if (c->fd < 0 || (c->gen & 0xffffff) != ((d >> 8) & 0xffffff))
		return; /* a connection since closed */
	switch (op) {
	case OP_RECV:
		if (res == 0) {
			stream_ended(i);
		} else if (res == -ENOBUFS) {
			c->recv_armed = 0;
			arm_recv(i);
		} else {
			failed(i);
		}
		break;
	case OP_HEAD:
		if (res > 0) {
			if (stamp_mode)
				oneshot_stamp(i);
			head_in(i, res);
		} else {
			failed(i);
		}
		break;
	case OP_TRUNC:
		if (res <= 0) {
			failed(i);
		} else {
			if (stamp_mode)
				oneshot_stamp(i);
			c->remaining -= res;
			if (c->remaining == 0)
				done(i);
			else
				discard(i); /* the receive ended early: discard the rest */
		}
		break;
	default: /* a failed connect or send (the linked operations after it are cancelled) */
		failed(i);
	}
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	const char *host = "127.0.0.1", *path = NULL;
	int port = 0, opt;
	double duration = 4;
	nconns = 50;
	while ((opt = getopt(argc, argv, "a:p:u:c:d:r:th:TH:")) != -1) {
		switch (opt) {
		case 'a': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'u': path = optarg; break;
		case 'c': nconns = atoi(optarg); break;
		case 'd': duration = atof(optarg); break;
		case 'r': per_conn = atoi(optarg); break;
		case 't': trunc_mode = 1; break;
		case 'h': head_read = atoi(optarg); break;
		case 'T': stamp_mode = 1; break;
		case 'H': hold_us = atof(optarg); break;
		default:
			fprintf(stderr, "usage: floor -p PORT -u PATH [-a ADDR] [-c CONNS] [-d SECS] "
					"[-r REQS_PER_CONN] [-t] [-h HEAD_READ] [-T] [-H HOLD_US]\n");
			return 2;
		}
	}
	if (!port || !path || nconns < 1 || head_read < 64 || head_read > HEAD_MAX ||
	    (trunc_mode && per_conn)) {
		fprintf(stderr, "floor: needs -p and -u; -t is for keep-alive only\n");
		return 2;
	}
	addr.sin_family = AF_INET;
	addr.sin_port = htons(port);
	if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
		fprintf(stderr, "floor: not an IPv4 address: %s\n", host);
		return 2;
	}
	len_keep = snprintf(req_keep, sizeof req_keep, "GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n",
			    path, host, port);
	len_last = snprintf(req_last, sizeof req_last,
			    "GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n", path,
			    host, port);

	/* As loadlens: completions run only when this thread waits (Linux ≥ 6.1). */
	unsigned entries = 64;
	while (entries < 4u * nconns)
		entries *= 2;
	struct io_uring_params p = {0};
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL |
		  IORING_SETUP_CQSIZE;
	p.cq_entries = entries * 4;
	int r = io_uring_queue_init_params(entries, &ring, &p);
	if (r < 0) {
		fprintf(stderr, "floor: io_uring: %s\n", strerror(-r));
		return 1;
	}
	io_uring_register_ring_fd(&ring);

	nbufs = 16;
	while (nbufs < (unsigned)nconns && nbufs < 256)
		nbufs *= 2;
	br = mmap(NULL, nbufs * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	bufs = mmap(NULL, (size_t)nbufs * BUF_SIZE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (br == MAP_FAILED || bufs == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	struct io_uring_buf_reg reg = {.ring_addr = (uint64_t)br, .ring_entries = nbufs, .bgid = 0};
	if ((r = io_uring_register_buf_ring(&ring, &reg, 0)) < 0) {
		fprintf(stderr, "floor: provided buffers: %s\n", strerror(-r));
		return 1;
	}
	io_uring_buf_ring_init(br);
	for (unsigned b = 0; b < nbufs; b++)
		io_uring_buf_ring_add(br, bufs + (size_t)b * BUF_SIZE, BUF_SIZE, b,
				      io_uring_buf_ring_mask(nbufs), b);
	io_uring_buf_ring_advance(br, nbufs);

	mshot_msg.msg_controllen = CONTROL;
	conns = calloc(nconns, sizeof *conns);
	for (int i = 0; i < nconns; i++) {
		conns[i].fd = -1;
		conns[i].buf = malloc(HEAD_MAX);
		if (stamp_mode && trunc_mode) {
			struct oneshot *o = calloc(1, sizeof *o);
			o->msg.msg_iov = &o->iov;
			o->msg.msg_iovlen = 1;
			o->msg.msg_control = o->control.buf;
			conns[i].os = o;
		}
		open_conn(i);
	}

	unsigned quarter = nconns / 4 ? nconns / 4 : 1, want = quarter;
	double start = now_s(), deadline = start + duration, t;
	double rate_at = start;      /* -H: when the completion rate was last measured */
	uint64_t completions = 0, rate_count = 0;
	while ((t = now_s()) < deadline) {
		if (hold_us > 0 && t - rate_at >= 0.02) {
			/* As loadlens: as many as arrive in hold_us at the recent rate, at most a
			 * quarter of the connections, at least one. */
			double n = (double)(completions - rate_count) / ((t - rate_at) * 1e6) * hold_us;
			want = n < 1 ? 1 : n > quarter ? quarter : (unsigned)n;
			rate_at = t;
			rate_count = completions;
		}
		double left = deadline - t;
		struct __kernel_timespec ts = {0, left < 1e-3 ? (long long)(left * 1e9) : 1000000};
		struct io_uring_cqe *cqe;
		io_uring_submit_and_wait_timeout(&ring, &cqe, want, &ts, NULL);
		unsigned head, seen = 0;
		recycled = 0;
		io_uring_for_each_cqe(&ring, head, cqe) {
			complete(cqe);
			seen++;
		}
		io_uring_cq_advance(&ring, seen);
		completions += seen;
		if (recycled)
			io_uring_buf_ring_advance(br, recycled);
	}
	double secs = now_s() - start;
	stopping = 1;
	printf("responses %llu ok %llu bytes %llu errors %llu seconds %.6f\n",
	       (unsigned long long)responses, (unsigned long long)ok, (unsigned long long)bytes,
	       (unsigned long long)errors, secs);
	if (stamp_mode)
		fprintf(stderr, "timestamps %llu checksum %llx\n", (unsigned long long)stamps,
			(unsigned long long)stamp_sum);
	return 0;
}
