// Writing bitparity's outputs (reports, JUnit files, corpus entries, results) without losing or
// replacing what should not be: every writer goes through write_file_safely.
//
// A regular file (or a path that does not exist yet) is replaced atomically: the text goes to a
// unique temporary file in the same folder (".<name>.tmp.<pid>.<random>"), which is flushed to
// disk (fsync) and renamed over the destination, and the folder is synced so the rename survives
// a crash. A reader, or an interrupted run, never sees a partial file.
//
// A character device or a pipe (/dev/stdout, /dev/null, a FIFO) is written through on purpose,
// never replaced. Anything else given as an output path is an error, never replaced: a symbolic
// link, a folder, a block device, a socket.
//
// Errors are std::runtime_error naming the path and the system's reason ("No space left on
// device"), so a full disk or a read-only folder reads as what it is.
#pragma once

#include <filesystem>
#include <string_view>

namespace bitparity {

// Writes `text` to `path` as described above. The folder must exist.
void write_file_safely(const std::filesystem::path& path, std::string_view text);

// Checks, before any work starts, that write_file_safely(path, ...) can succeed later: the path
// is absent, a regular file or a character device or pipe (not a link, folder or other node),
// and its folder exists (or can be created, with `create_folders`) and takes a new file (a probe
// file is created and removed). Throws std::runtime_error with the reason.
void check_output_file(const std::filesystem::path& path, bool create_folders = false);

// The same for a folder that will receive files (a corpus): absent (and creatable), or a folder
// (or a link to one) where a new file can be created.
void check_output_folder(const std::filesystem::path& dir);

}  // namespace bitparity
