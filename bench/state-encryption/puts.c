/* puts PORT [COUNT [TIMEOUT_S [ETCD_PID]]] : times COUNT (default 1000) sequential etcd v3 puts
 * (POST /v3/kv/put, the JSON gateway of etcd 3.4: base64 key and value) of 256-byte
 * values under distinct keys, over one kept-alive HTTP/1.1 connection to 127.0.0.1:PORT,
 * after 10 warm-up puts that are not counted, and prints one line:
 *   p50_ms=4.210 p99_ms=11.873 mean_ms=4.902 max_ms=30.112 n=1000
 * Each put is timed with CLOCK_MONOTONIC from the request's write to the response's last
 * byte; it returns once etcd has written (and fsync'd) its WAL entry. Before the puts it
 * waits for GET /health to say "true" (an etcd just started), and gives up at once if
 * ETCD_PID, when given, has ended. Bounded: the whole run, that wait included, gives up
 * after TIMEOUT_S seconds (default 600), and so does any one read or write; a failure
 * prints the reason on stderr and exits 1.
 * Built by bench/state-encryption/run.sh with the host's gcc (static) and run on a node
 * in QEMU beside Debian's etcd; it also runs against any etcd 3.4 on the host. */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kWarmup = 10, kValueBytes = 256 };

static void give_up(int sig) {
  (void)sig;
  static const char msg[] = "puts: timed out (TIMEOUT_S)\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

static void die(const char* what) {
  fprintf(stderr, "puts: %s\n", what);
  exit(1);
}

static double ms_since(const struct timespec* t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static int connect_to(int port, int io_timeout_s) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket failed");
  struct timeval tv = {io_timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (const struct sockaddr*)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* The connection's read buffer: a response may arrive in pieces, and nothing past it is
 * expected (one request at a time), but whatever is read is kept for the next. */
static char buf[1 << 16];
static size_t have;

static int fill(int fd) {
  if (have == sizeof buf) return -1;
  ssize_t r;
  do r = read(fd, buf + have, sizeof buf - have);
  while (r < 0 && errno == EINTR);
  if (r <= 0) return -1;
  have += (size_t)r;
  return 0;
}

static void consume(size_t n) {
  memmove(buf, buf + n, have - n);
  have -= n;
}

/* Reads one HTTP/1.1 response (Content-Length or chunked) into body (NUL-terminated,
 * cut at body_size - 1); returns its status, or -1 when the connection fails. */
static int read_response(int fd, char* body, size_t body_size) {
  char* end;
  while ((end = memmem(buf, have, "\r\n\r\n", 4)) == NULL) {
    if (fill(fd) != 0) return -1;
  }
  const size_t head_len = (size_t)(end - buf) + 4;
  int status = -1;
  long length = -1;
  int chunked = 0;
  char head[8192];
  if (head_len >= sizeof head) return -1;
  memcpy(head, buf, head_len);
  head[head_len] = '\0';
  consume(head_len);
  if (sscanf(head, "HTTP/1.%*d %d", &status) != 1) return -1;
  for (char* line = strstr(head, "\r\n"); line != NULL && line[2] != '\r'; line = strstr(line + 2, "\r\n")) {
    if (strncasecmp(line + 2, "Content-Length:", 15) == 0) length = strtol(line + 17, NULL, 10);
    if (strncasecmp(line + 2, "Transfer-Encoding:", 18) == 0 && strstr(line + 20, "chunked") != NULL) chunked = 1;
  }
  size_t got = 0;
  for (;;) {
    long part = length;
    if (chunked) {
      while ((end = memmem(buf, have, "\r\n", 2)) == NULL) {
        if (fill(fd) != 0) return -1;
      }
      part = strtol(buf, NULL, 16);
      consume((size_t)(end - buf) + 2);
    }
    if (part < 0) return -1; /* neither a length nor chunked: not what etcd sends */
    while (have < (size_t)part + (chunked ? 2 : 0)) {
      if (fill(fd) != 0) return -1;
    }
    const size_t keep = got + (size_t)part < body_size ? (size_t)part : body_size - 1 - got;
    memcpy(body + got, buf, keep);
    got += keep;
    consume((size_t)part + (chunked ? 2 : 0));
    if (!chunked || part == 0) break;
  }
  body[got] = '\0';
  return status;
}

static void base64(const unsigned char* in, size_t n, char* out) {
  static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    const unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
    out[o++] = t[v >> 18 & 63];
    out[o++] = t[v >> 12 & 63];
    out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? t[v & 63] : '=';
  }
  out[o] = '\0';
}

/* Whether process PID has ended: gone, or a zombie its parent has not reaped yet. */
static int ended(int pid) {
  char path[64], stat[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 1;
  const size_t n = fread(stat, 1, sizeof stat - 1, f);
  fclose(f);
  stat[n] = '\0';
  const char* state = strrchr(stat, ')');
  return state == NULL || state[1] == '\0' || state[2] == 'Z' || state[2] == 'X';
}

/* Waits for GET /health to answer {"health":"true"}, each try on a new connection;
 * gives up when etcd's process (ETCD_PID, 0: not watched) ends. */
static void wait_healthy(int port, int etcd_pid) {
  static const char req[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  char body[512];
  for (;;) {
    const int fd = connect_to(port, 5);
    if (fd >= 0) {
      have = 0;
      const int status = write_all(fd, req, sizeof req - 1) == 0 ? read_response(fd, body, sizeof body) : -1;
      close(fd);
      if (status == 200 && strstr(body, "\"health\":\"true\"") != NULL) break;
    }
    if (etcd_pid > 0 && ended(etcd_pid)) die("etcd ended before it answered /health");
    usleep(200 * 1000);
  }
  have = 0;
}

static unsigned long long rng = 0x9e3779b97f4a7c15ull;

static unsigned long long next_random(void) { /* xorshift64*: values need not be secret */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ull;
}

/* One put of a fresh random value under KEY; returns its time in ms. */
static double put(int fd, const char* key) {
  unsigned char value[kValueBytes];
  for (size_t i = 0; i < sizeof value; i += 8) {
    const unsigned long long r = next_random();
    memcpy(value + i, &r, 8);
  }
  char key64[256], value64[4 * kValueBytes / 3 + 8], json[1024], req[2048], body[4096];
  base64((const unsigned char*)key, strlen(key), key64);
  base64(value, sizeof value, value64);
  const int json_len = snprintf(json, sizeof json, "{\"key\":\"%s\",\"value\":\"%s\"}", key64, value64);
  const int req_len = snprintf(req, sizeof req,
                               "POST /v3/kv/put HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                               "Content-Length: %d\r\n\r\n%s",
                               json_len, json);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (write_all(fd, req, (size_t)req_len) != 0) die("writing a put failed (etcd closed the connection?)");
  const int status = read_response(fd, body, sizeof body);
  const double took = ms_since(&t0);
  if (status != 200 || strstr(body, "\"header\"") == NULL) {
    fprintf(stderr, "puts: put %s failed: HTTP status %d, body %.200s\n", key, status, body);
    exit(1);
  }
  return took;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  const int port = argc > 1 ? atoi(argv[1]) : 0;
  const int count = argc > 2 ? atoi(argv[2]) : 1000;
  const int timeout_s = argc > 3 ? atoi(argv[3]) : 600;
  const int etcd_pid = argc > 4 ? atoi(argv[4]) : 0;
  if (argc < 2 || argc > 5 || port < 1 || port > 65535 || count < 1 || count > 1000000 || timeout_s < 1 ||
      etcd_pid < 0) {
    fprintf(stderr,
            "usage: puts PORT [COUNT [TIMEOUT_S [ETCD_PID]]]   (COUNT 1..1000000, default 1000; TIMEOUT_S default 600)\n");
    return 2;
  }
  signal(SIGALRM, give_up);
  signal(SIGPIPE, SIG_IGN);
  alarm((unsigned)timeout_s);
  rng ^= (unsigned long long)getpid() << 32 ^ (unsigned long long)time(NULL);
  double* took = malloc(sizeof(double) * (size_t)count);
  if (took == NULL) die("out of memory");
  wait_healthy(port, etcd_pid);
  const int fd = connect_to(port, timeout_s);
  if (fd < 0) die("connecting for the puts failed");
  char key[64];
  for (int i = 0; i < kWarmup; ++i) {
    snprintf(key, sizeof key, "sprout-bench/warmup/%d", i);
    put(fd, key);
  }
  double sum = 0;
  for (int i = 0; i < count; ++i) {
    snprintf(key, sizeof key, "sprout-bench/key/%08d", i);
    took[i] = put(fd, key);
    sum += took[i];
  }
  close(fd);
  qsort(took, (size_t)count, sizeof(double), by_value);
  /* nearest rank: the smallest value with at least q% of the puts at or below it */
  const int p50 = (count * 50 + 99) / 100 - 1, p99 = (count * 99 + 99) / 100 - 1;
  printf("p50_ms=%.3f p99_ms=%.3f mean_ms=%.3f max_ms=%.3f n=%d\n", took[p50], took[p99], sum / count, took[count - 1],
         count);
  free(took);
  return 0;
}
