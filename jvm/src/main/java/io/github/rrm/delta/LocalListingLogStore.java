package io.github.rrm.delta;

import io.delta.storage.HDFSLogStore;
import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFileSystem;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;

/**
 * Delta's log store for local paths ({@code spark.delta.logStore.file.impl}): Delta's own default for them,
 * {@link HDFSLogStore}, with a listing that asks the file system for the status of the files it returns only.
 *
 * <p>Why: every snapshot update lists the table's {@code _delta_log} from the last checkpoint on, and Delta's
 * listing ({@code fs.listStatus} of the whole directory, then a filter by name) builds a Hadoop
 * {@code FileStatus}, two system calls and a qualified {@code Path}, for every file in it. A log keeps every
 * commit's JSON and checksum for {@code delta.logRetentionDuration}, so a table the job appends to every 10 s
 * holds about 100,000 of them after 6 days, and each exactly-once append grows slower with them (the figures are
 * in {@code spark_session.py} and {@code bench/results/delta_log.json}). Listing the names (about 0.5 us each)
 * and stating the few dozen from the checkpoint on keeps a commit's cost flat however long the log is.
 *
 * <p>The listing is otherwise Delta's: the files whose names sort at or after {@code path}'s name, sorted by
 * name, as the file system reports them; a missing directory is a {@link FileNotFoundException}; the
 * checksum files {@link LocalFileSystem} hides ({@code .<name>.crc}) stay hidden; a file deleted between the
 * listing and its status (log cleanup) is left out, as {@code listStatus} leaves it out. Writes and reads are
 * {@link HDFSLogStore}'s: a commit still fails when another writer committed the same version first. Other file
 * systems keep Delta's listing.
 */
public class LocalListingLogStore extends HDFSLogStore {
  public LocalListingLogStore(Configuration hadoopConf) {
    super(hadoopConf);
  }

  @Override
  public Iterator<FileStatus> listFrom(Path path, Configuration hadoopConf) throws IOException {
    FileSystem fs = path.getFileSystem(hadoopConf);
    File directory;
    if (fs instanceof LocalFileSystem local) {
      directory = local.pathToFile(path.getParent());
    } else if (fs instanceof RawLocalFileSystem raw) {
      directory = raw.pathToFile(path.getParent());
    } else {
      return super.listFrom(path, hadoopConf);
    }
    String[] names = directory.list();
    if (names == null) {
      throw new FileNotFoundException("File " + path.getParent() + " does not exist");
    }
    String from = path.getName();
    boolean hidesChecksums = fs instanceof ChecksumFileSystem;
    List<String> selected = new ArrayList<>();
    for (String name : names) {
      if (name.compareTo(from) >= 0) {
        selected.add(name);
      }
    }
    selected.sort(null);
    List<FileStatus> listed = new ArrayList<>(selected.size());
    for (String name : selected) {
      Path file = new Path(path.getParent(), name);
      if (hidesChecksums && ChecksumFileSystem.isChecksumFile(file)) {
        continue;
      }
      try {
        listed.add(fs.getFileStatus(file));
      } catch (FileNotFoundException deletedSinceListed) {
        // log cleanup removed it between the listing and now, as listStatus would not have seen it
      }
    }
    return listed.iterator();
  }
}
