#include "core/safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>

namespace bitparity {
namespace {

namespace fs = std::filesystem;

std::string reason(int error) { return std::strerror(error); }

[[noreturn]] void fail(const fs::path& path, const std::string& why) {
  throw std::runtime_error("cannot write " + path.string() + ": " + why);
}

// What an output path is now, and so how it is written.
enum class Kind { kAbsent, kRegular, kWriteThrough, kRefused };
struct Target {
  Kind kind;
  std::string why;  // for kRefused
};

// /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: the descriptor they name, written to
// directly (the shell may have redirected it to a file, which must not be truncated or replaced).
std::optional<int> descriptor_of(const fs::path& path) {
  const std::string p = path.lexically_normal().string();
  if (p == "/dev/stdout") return 1;
  if (p == "/dev/stderr") return 2;
  for (const std::string prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (p.rfind(prefix, 0) != 0 || p.size() == prefix.size() || p.size() > prefix.size() + 9) continue;
    const std::string digits = p.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") == std::string::npos) return std::stoi(digits);
  }
  return std::nullopt;
}

Target inspect(const fs::path& path) {
  if (descriptor_of(path)) return {Kind::kWriteThrough, ""};
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0) {
    if (errno == ENOENT) return {Kind::kAbsent, ""};
    fail(path, reason(errno));
  }
  const mode_t mode = link.st_mode;
  if (S_ISREG(mode)) return {Kind::kRegular, ""};
  if (S_ISCHR(mode) || S_ISFIFO(mode)) return {Kind::kWriteThrough, ""};
  if (S_ISLNK(mode)) {
    struct stat target {};
    if (::stat(path.c_str(), &target) == 0 && (S_ISCHR(target.st_mode) || S_ISFIFO(target.st_mode)))
      return {Kind::kWriteThrough, ""};
    return {Kind::kRefused, "it is a symbolic link, which bitparity does not replace (give the link's target)"};
  }
  if (S_ISDIR(mode)) return {Kind::kRefused, "it is a folder"};
  if (S_ISBLK(mode)) return {Kind::kRefused, "it is a block device, which bitparity does not replace"};
  if (S_ISSOCK(mode)) return {Kind::kRefused, "it is a socket"};
  return {Kind::kRefused, "it is not a regular file"};
}

// Every byte, through short writes and signals.
bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string random_hex() {
  std::random_device device;
  const uint64_t bits = (static_cast<uint64_t>(device()) << 32) ^ device();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
  return hex;
}

fs::path folder_of(const fs::path& path) { return path.parent_path().empty() ? fs::path(".") : path.parent_path(); }

// A new, exclusively created file beside `path`: ".<name>.tmp.<pid>.<random>".
std::pair<fs::path, int> create_temp(const fs::path& dir, const std::string& name) {
  for (int attempt = 0;; ++attempt) {
    const fs::path temp = dir / ("." + name + ".tmp." + std::to_string(::getpid()) + "." + random_hex());
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return {temp, fd};
    if (errno != EEXIST || attempt == 8) fail(dir / name, "cannot create a file in " + dir.string() + ": " + reason(errno));
  }
}

void write_through(const fs::path& path, std::string_view text) {
  if (const std::optional<int> fd = descriptor_of(path)) {
    if (!write_all(*fd, text)) fail(path, reason(errno));
    return;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail(path, reason(errno));
  const bool written = write_all(fd, text);
  const int error = errno;
  ::close(fd);
  if (!written) fail(path, reason(error));
}

void replace_atomically(const fs::path& path, std::string_view text, bool existed) {
  const fs::path dir = folder_of(path);
  auto [temp, fd] = create_temp(dir, path.filename().string());
  auto give_up = [&, temp = temp](int error) {
    ::unlink(temp.c_str());
    fail(path, reason(error));
  };
  struct stat old {};
  if (existed && ::stat(path.c_str(), &old) == 0) ::fchmod(fd, old.st_mode & 07777);  // keep the file's mode
  if (!write_all(fd, text) || ::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    give_up(error);
  }
  if (::close(fd) != 0) give_up(errno);
  if (::rename(temp.c_str(), path.c_str()) != 0) give_up(errno);
  // The rename itself reaches the disk with the folder's entry.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);  // EINVAL on file systems without directory sync: nothing more to do there
    ::close(dir_fd);
  }
}

// Creates and removes a file in `dir`: proves it exists, is a folder and takes new files.
void probe_folder(const fs::path& dir, const fs::path& for_path) {
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0) fail(for_path, "folder " + dir.string() + ": " + reason(errno));
  if (!S_ISDIR(info.st_mode)) fail(for_path, dir.string() + " is not a folder");
  auto [temp, fd] = create_temp(dir, "bitparity-probe");
  ::close(fd);
  ::unlink(temp.c_str());
}

// The nearest folder of `path` (itself included) that exists.
fs::path nearest_existing(fs::path path) {
  std::error_code error;
  while (!path.empty() && !fs::exists(fs::symlink_status(path, error))) {
    if (path == path.parent_path()) break;
    path = path.parent_path();
  }
  return path.empty() ? fs::path(".") : path;
}

}  // namespace

void write_file_safely(const fs::path& path, std::string_view text) {
  const Target target = inspect(path);
  switch (target.kind) {
    case Kind::kRefused: fail(path, target.why);
    case Kind::kWriteThrough: write_through(path, text); return;
    case Kind::kAbsent:
    case Kind::kRegular: replace_atomically(path, text, target.kind == Kind::kRegular); return;
  }
}

void check_output_file(const fs::path& path, bool create_folders) {
  const Target target = inspect(path);
  if (target.kind == Kind::kRefused) fail(path, target.why);
  if (target.kind == Kind::kWriteThrough) return;
  const fs::path dir = folder_of(path);
  std::error_code error;
  if (!fs::exists(dir, error)) {
    if (!create_folders) fail(path, "folder " + dir.string() + " does not exist");
    probe_folder(nearest_existing(dir), path);
    return;
  }
  probe_folder(dir, path);
}

void check_output_folder(const fs::path& dir) {
  std::error_code error;
  if (!fs::exists(dir, error)) {
    probe_folder(nearest_existing(dir), dir);
    return;
  }
  probe_folder(dir, dir);
}

}  // namespace bitparity
