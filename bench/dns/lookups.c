/* lookups NAME... : resolves each NAME COUNT times (LOOKUPS_COUNT, default 1000), one
 * lookup at a time, through the C library's getaddrinfo (IPv4 only, so each lookup is one
 * question: the way an application in a pod resolves), and prints one line a name:
 *   NAME n=1000 failed=0 p50_us=812 p99_us=2950 max_us=8123 addr=10.96.0.1
 * (addr: the first answer's first address, "-" when no lookup succeeded)
 * Built by the QEMU harness with the host's gcc and run in a pod of the toolbox image,
 * whose C library is the same Debian libc6 (bench/dns/pod-lookups.sh). A name in the
 * pod's /etc/hosts (its own hostname) is the baseline: the same call, no DNS question. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static int by_value(const void* a, const void* b) {
  const long x = *(const long*)a;
  const long y = *(const long*)b;
  return (x > y) - (x < y);
}

static long micros_since(const struct timespec* t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (t1.tv_sec - t0->tv_sec) * 1000000L + (t1.tv_nsec - t0->tv_nsec) / 1000L;
}

int main(int argc, char** argv) {
  const char* env = getenv("LOOKUPS_COUNT");
  const int count = env != NULL ? atoi(env) : 1000;
  if (argc < 2 || count < 1 || count > 100000) {
    fprintf(stderr, "usage: lookups NAME...   (LOOKUPS_COUNT=1..100000, default 1000)\n");
    return 2;
  }
  long* took = malloc(sizeof(long) * (size_t)count);
  if (took == NULL) return 1;
  int status = 0;
  for (int n = 1; n < argc; ++n) {
    int failed = 0;
    char addr[INET_ADDRSTRLEN] = "-";
    for (int i = 0; i < count; ++i) {
      struct addrinfo hints;
      memset(&hints, 0, sizeof hints);
      hints.ai_family = AF_INET;
      hints.ai_socktype = SOCK_STREAM;
      struct addrinfo* found = NULL;
      struct timespec t0;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      const int rc = getaddrinfo(argv[n], NULL, &hints, &found);
      took[i] = micros_since(&t0);
      if (rc != 0) {
        ++failed;
      } else {
        if (addr[0] == '-' && found != NULL && found->ai_family == AF_INET) {
          inet_ntop(AF_INET, &((const struct sockaddr_in*)(const void*)found->ai_addr)->sin_addr, addr, sizeof addr);
        }
        freeaddrinfo(found);
      }
    }
    qsort(took, (size_t)count, sizeof(long), by_value);
    printf("%s n=%d failed=%d p50_us=%ld p99_us=%ld max_us=%ld addr=%s\n", argv[n], count, failed, took[count / 2],
           took[(count * 99) / 100 - (count >= 100 ? 1 : 0)], took[count - 1], addr);
    if (failed > 0) status = 1;
  }
  free(took);
  return status;
}
