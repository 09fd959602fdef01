// ztdelay: a fixed delay for every packet of one NFQUEUE queue, for kernels without tc netem (netns.sh
// `link NODE delay MS`). iptables sends the node's packets to queue N (`-j NFQUEUE --queue-num N`); this
// program receives their ids (metadata only, never the payload), holds each for MS ms and then accepts
// it. The delay is constant, so packets leave in the order they came (one FIFO), and one batch verdict
// ("accept every id up to this one") releases all that are due. Talks nfnetlink directly (no
// libnetfilter_queue). Runs in the node's network namespace (NFQUEUE queues are per namespace).
//   ztdelay --queue N --delay-ms MS [--pid-file FILE]
// On SIGTERM or SIGINT it accepts every held packet and exits 0. Exit 2: bad arguments; 1: netlink failed.
#define _GNU_SOURCE
// glibc's socket headers before the kernel's (linux/in.h yields to netinet/in.h only in this order).
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>

static volatile sig_atomic_t stop_requested = 0;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// One nfnetlink request under construction: header, nfgenmsg, then attributes.
struct Msg {
  char buf[256];
  struct nlmsghdr* nlh;
};

static void msg_start(struct Msg* m, uint16_t type, uint16_t flags, uint16_t queue) {
  memset(m->buf, 0, sizeof m->buf);
  m->nlh = (struct nlmsghdr*)m->buf;
  m->nlh->nlmsg_len = NLMSG_LENGTH(sizeof(struct nfgenmsg));
  m->nlh->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | type;
  m->nlh->nlmsg_flags = NLM_F_REQUEST | flags;
  struct nfgenmsg* g = (struct nfgenmsg*)NLMSG_DATA(m->nlh);
  g->nfgen_family = AF_UNSPEC;
  g->version = NFNETLINK_V0;
  g->res_id = htons(queue);
}

static void msg_attr(struct Msg* m, uint16_t type, const void* data, uint16_t len) {
  struct nlattr* a = (struct nlattr*)(m->buf + NLMSG_ALIGN(m->nlh->nlmsg_len));
  a->nla_type = type;
  a->nla_len = NLA_HDRLEN + len;
  memcpy((char*)a + NLA_HDRLEN, data, len);
  m->nlh->nlmsg_len = NLMSG_ALIGN(m->nlh->nlmsg_len) + NLA_ALIGN(a->nla_len);
}

static int msg_send(int fd, struct Msg* m) {
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  return sendto(fd, m->buf, m->nlh->nlmsg_len, 0, (struct sockaddr*)&kernel, sizeof kernel) < 0 ? -1 : 0;
}

// Sends a configuration request and waits for the kernel's acknowledgement; 0 or -errno.
static int configure(int fd, struct Msg* m) {
  if (msg_send(fd, m) != 0) return -errno;
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0) return -errno;
    for (struct nlmsghdr* h = (struct nlmsghdr*)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n))
      if (h->nlmsg_type == NLMSG_ERROR) return ((struct nlmsgerr*)NLMSG_DATA(h))->error;
  }
}

// The held packets: ids with the time each may leave, oldest first (a growable ring).
struct Held {
  uint32_t* id;
  int64_t* due_ns;
  size_t head, count, cap;
};

static void held_push(struct Held* q, uint32_t id, int64_t due) {
  if (q->count == q->cap) {
    size_t cap = q->cap ? 2 * q->cap : 4096;
    uint32_t* ids = malloc(cap * sizeof *ids);
    int64_t* dues = malloc(cap * sizeof *dues);
    if (!ids || !dues) { fprintf(stderr, "ztdelay: out of memory holding %zu packets\n", q->count); exit(1); }
    for (size_t i = 0; i < q->count; ++i) {
      ids[i] = q->id[(q->head + i) % q->cap];
      dues[i] = q->due_ns[(q->head + i) % q->cap];
    }
    free(q->id), free(q->due_ns);
    q->id = ids, q->due_ns = dues, q->head = 0, q->cap = cap;
  }
  size_t at = (q->head + q->count) % q->cap;
  q->id[at] = id, q->due_ns[at] = due;
  ++q->count;
}

// Accepts every id up to `id` (NFQNL_MSG_VERDICT_BATCH).
static int accept_through(int fd, uint16_t queue, uint32_t id) {
  struct Msg m;
  msg_start(&m, NFQNL_MSG_VERDICT_BATCH, 0, queue);
  struct nfqnl_msg_verdict_hdr v = {.verdict = htonl(NF_ACCEPT), .id = htonl(id)};
  msg_attr(&m, NFQA_VERDICT_HDR, &v, sizeof v);
  return msg_send(fd, &m);
}

// Reads every pending packet notice into `q`, each due `delay_ns` from now. Returns -1 on a netlink error.
static int receive(int fd, struct Held* q, int64_t delay_ns) {
  static char buf[1 << 16];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
      if (errno == ENOBUFS) continue;  // notices lost; their packets go with the next batch verdict
      return -1;
    }
    const int64_t due = now_ns() + delay_ns;
    for (struct nlmsghdr* h = (struct nlmsghdr*)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
      if ((h->nlmsg_type & 0xff) != NFQNL_MSG_PACKET) continue;
      int len = (int)h->nlmsg_len - NLMSG_LENGTH(sizeof(struct nfgenmsg));
      struct nlattr* a = (struct nlattr*)((char*)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct nfgenmsg)));
      for (; len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= len;
           len -= NLA_ALIGN(a->nla_len), a = (struct nlattr*)((char*)a + NLA_ALIGN(a->nla_len))) {
        if ((a->nla_type & NLA_TYPE_MASK) != NFQA_PACKET_HDR) continue;
        struct nfqnl_msg_packet_hdr ph;
        memcpy(&ph, (char*)a + NLA_HDRLEN, sizeof ph);
        held_push(q, ntohl(ph.packet_id), due);
      }
    }
  }
}

static int usage(const char* why) {
  fprintf(stderr, "ztdelay: %s\nusage: ztdelay --queue N --delay-ms MS [--pid-file FILE]\n", why);
  return 2;
}

int main(int argc, char** argv) {
  long queue = -1, delay_ms = -1;
  const char* pid_file = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--queue")) queue = strtol(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--delay-ms")) delay_ms = strtol(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--pid-file")) pid_file = argv[i + 1];
    else return usage("unknown option");
  }
  if (argc % 2 != 1) return usage("every option takes a value");
  if (queue < 0 || queue > 65535) return usage("--queue N: 0..65535");
  if (delay_ms < 0 || delay_ms > 60000) return usage("--delay-ms MS: 0..60000");

  int fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER);
  struct sockaddr_nl self = {.nl_family = AF_NETLINK};
  if (fd < 0 || bind(fd, (struct sockaddr*)&self, sizeof self) != 0) { perror("ztdelay: netlink socket"); return 1; }
  int rcvbuf = 8 << 20;  // room for the notices of a burst; root may exceed rmem_max
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
  int one = 1;  // no ENOBUFS report for lost notices: the batch verdict covers their packets
  setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);

  struct Msg m;
  msg_start(&m, NFQNL_MSG_CONFIG, NLM_F_ACK, (uint16_t)queue);
  struct nfqnl_msg_config_cmd cmd = {.command = NFQNL_CFG_CMD_BIND, .pf = htons(AF_INET)};
  msg_attr(&m, NFQA_CFG_CMD, &cmd, sizeof cmd);
  int err = configure(fd, &m);
  if (err != 0) { fprintf(stderr, "ztdelay: binding queue %ld: %s\n", queue, strerror(-err)); return 1; }
  msg_start(&m, NFQNL_MSG_CONFIG, NLM_F_ACK, (uint16_t)queue);
  struct nfqnl_msg_config_params params = {.copy_range = htonl(0), .copy_mode = NFQNL_COPY_META};
  msg_attr(&m, NFQA_CFG_PARAMS, &params, sizeof params);
  // A full queue accepts rather than drops (fail-open): a delay emulator must not add loss.
  uint32_t maxlen = htonl(1u << 20), flags = htonl(NFQA_CFG_F_FAIL_OPEN);
  msg_attr(&m, NFQA_CFG_QUEUE_MAXLEN, &maxlen, sizeof maxlen);
  msg_attr(&m, NFQA_CFG_FLAGS, &flags, sizeof flags);
  msg_attr(&m, NFQA_CFG_MASK, &flags, sizeof flags);
  err = configure(fd, &m);
  if (err != 0) { fprintf(stderr, "ztdelay: configuring queue %ld: %s\n", queue, strerror(-err)); return 1; }

  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  if (pid_file) {  // written once the queue is bound: the caller waits for it
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", pid_file);
    FILE* f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 || rename(tmp, pid_file) != 0) {
      perror("ztdelay: pid file");
      return 1;
    }
  }

  const int64_t delay_ns = delay_ms * 1000000;
  struct Held q = {0};
  int have_last = 0;
  uint32_t last = 0;  // the newest id received
  while (!stop_requested) {
    int64_t wait_ns = q.count ? q.due_ns[q.head] - now_ns() : 1000000000;
    if (wait_ns < 0) wait_ns = 0;
    struct timespec ts = {.tv_sec = wait_ns / 1000000000, .tv_nsec = wait_ns % 1000000000};
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (ppoll(&p, 1, &ts, NULL) < 0 && errno != EINTR) { perror("ztdelay: ppoll"); return 1; }
    if ((p.revents & POLLIN) && receive(fd, &q, delay_ns) != 0) { perror("ztdelay: recv"); return 1; }
    const int64_t now = now_ns();
    int due = 0;
    uint32_t through = 0;
    while (q.count && q.due_ns[q.head] <= now) {
      through = q.id[q.head];
      q.head = (q.head + 1) % q.cap, --q.count, due = 1;
    }
    if (q.count) last = q.id[(q.head + q.count - 1) % q.cap], have_last = 1;
    else if (due) last = through, have_last = 1;
    if (due && accept_through(fd, (uint16_t)queue, through) != 0) { perror("ztdelay: verdict"); return 1; }
  }
  if (have_last) accept_through(fd, (uint16_t)queue, last);  // let everything held go
  return 0;
}
