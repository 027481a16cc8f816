// send_floor: what one TCP send of a streamed token costs the sender on loopback, the floor
// under Harrier's cost per streamed token (docs/benchmarks.md, "Generation"). A plain program.
//
//   build/bench/send_floor [SENDS] [BYTES] [GAP_US]      (defaults 20000, 200, 300)
//
// A child process connects and reads until the end; the parent sends SENDS messages of BYTES
// bytes with TCP_NODELAY, one every GAP_US microseconds (the reader is asleep in read() when
// each comes, as a streaming client is between tokens), and reports the CPU time of the send
// calls alone (CLOCK_THREAD_CPUTIME_ID around each), then the same back to back (GAP_US 0: the
// reader is busy and sends share its wake-ups). On loopback the sender's system call also runs
// the receiving socket's TCP processing and the reader's wake-up, as Harrier's sends do.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace {

double ThreadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// The mean CPU time of one send, in µs, over `sends` sends of `bytes` spaced by `gap_us`.
double MeanSendMicros(int sends, int bytes, int gap_us) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    std::perror("send_floor: listen");
    std::exit(1);
  }
  const pid_t reader = fork();
  if (reader == 0) {
    const int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) _exit(1);
    char buffer[65536];
    while (read(c, buffer, sizeof buffer) > 0) {
    }
    _exit(0);
  }
  const int s = accept(listener, nullptr, nullptr);
  const int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const std::string message(static_cast<size_t>(bytes), 'x');
  const timespec gap{0, static_cast<long>(gap_us) * 1000};
  double spent_ns = 0;
  for (int i = 0; i < sends; ++i) {
    const double before = ThreadCpuNs();
    if (send(s, message.data(), message.size(), 0) < 0) std::perror("send_floor: send");
    spent_ns += ThreadCpuNs() - before;
    if (gap_us > 0) nanosleep(&gap, nullptr);
  }
  close(s);
  close(listener);
  waitpid(reader, nullptr, 0);
  return spent_ns / sends / 1000;
}

}  // namespace

int main(int argc, char** argv) {
  const int sends = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int bytes = argc > 2 ? std::atoi(argv[2]) : 200;
  const int gap_us = argc > 3 ? std::atoi(argv[3]) : 300;
  // Two clock reads with nothing between them: what the measurement itself adds per send.
  double clock_ns = 0;
  for (int i = 0; i < 10000; ++i) {
    const double before = ThreadCpuNs();
    clock_ns += ThreadCpuNs() - before;
  }
  std::printf("RESULT bytes=%d clock_us=%.2f spaced_send_us=%.2f (gap %d us) "
              "back_to_back_send_us=%.2f\n",
              bytes, clock_ns / 10000 / 1000, MeanSendMicros(sends, bytes, gap_us), gap_us,
              MeanSendMicros(sends, bytes, 0));
  return 0;
}
