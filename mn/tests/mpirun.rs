//! The MPI transport for real: `mpirun -np 2` and `-np 4` start `kusari-mn-check`, each run
//! under a time limit (a hung job is killed and fails the test).
//!
//! Needs the `mpi` feature and `mpirun` on the PATH; without `mpirun` each test prints why it
//! skips, and `KUSARI_REQUIRE_MPI=1` (set by CI) makes that a failure. Run as root, OpenMPI
//! needs `OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`, which the tests set for
//! the jobs they start.
#![cfg(feature = "mpi")]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest a job may run: the checks take well under a second each.
const LIMIT: Duration = Duration::from_secs(120);

fn mpirun() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("mpirun"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let why = "SKIPPED: no mpirun on the PATH (install OpenMPI: see the guide)";
        if std::env::var_os("KUSARI_REQUIRE_MPI").is_some_and(|v| v == "1") {
            panic!("{why}, and KUSARI_REQUIRE_MPI=1");
        }
        eprintln!("{why}");
    }
    found
}

struct Job {
    success: bool,
    stdout: String,
    stderr: String,
}

/// `mpirun -np <ranks> kusari-mn-check <args>`, killed after [`LIMIT`].
fn run(mpirun: &PathBuf, ranks: usize, args: &[&str]) -> Job {
    run_with(mpirun, ranks, args, &[])
}

/// [`run`] with the variables `env` set for every rank.
fn run_with(mpirun: &PathBuf, ranks: usize, args: &[&str], env: &[(&str, &str)]) -> Job {
    let open_mpi = Command::new(mpirun)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("Open MPI"))
        .unwrap_or(false);
    let dir = std::env::temp_dir();
    let tag = format!("kusari-mn-{}-{}", std::process::id(), args.join("-"));
    let (out_path, err_path) = (
        dir.join(format!("{tag}.out")),
        dir.join(format!("{tag}.err")),
    );
    let mut cmd = Command::new(mpirun);
    cmd.arg("-np").arg(ranks.to_string());
    if open_mpi {
        // More ranks than cores (CI has two).
        cmd.arg("--oversubscribe");
    }
    let mut child = cmd
        .arg(env!("CARGO_BIN_EXE_kusari-mn-check"))
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // One thread per rank: the ranks share the machine's cores.
        .env("RAYON_NUM_THREADS", "1")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("mpirun starts");
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "mpirun -np {ranks} kusari-mn-check {args:?} ran over {LIMIT:?} and was \
                 killed; its output:\n{}\n{}",
                std::fs::read_to_string(&out_path).unwrap_or_default(),
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let job = Job {
        success: status.success(),
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    };
    let _ = std::fs::remove_file(out_path);
    let _ = std::fs::remove_file(err_path);
    job
}

/// Asserts that the job succeeded and that every rank printed its `ok` line.
fn assert_every_rank_ok(job: &Job, ranks: usize, what: &str) {
    assert!(
        job.success,
        "{what} failed:\n{}\n{}",
        job.stdout, job.stderr
    );
    for r in 0..ranks {
        assert!(
            job.stdout.contains(&format!("rank {r}: ok")),
            "{what}: rank {r} did not report:\n{}",
            job.stdout
        );
    }
}

#[test]
fn every_collective_gives_its_hand_computed_result_on_2_3_and_4_ranks() {
    let Some(mpirun) = mpirun() else { return };
    for ranks in [2, 3, 4] {
        let job = run(&mpirun, ranks, &["collectives"]);
        assert_every_rank_ok(&job, ranks, &format!("collectives on {ranks} ranks"));
    }
}

/// N ranks with B/N examples each give the parameters of one process with B, to rounding.
#[test]
fn data_parallel_training_matches_one_process_with_the_whole_batch() {
    let Some(mpirun) = mpirun() else { return };
    for name in ["naive", "flat"] {
        for ranks in [2, 4] {
            let job = run(&mpirun, ranks, &["equivalence", name]);
            assert_every_rank_ok(&job, ranks, &format!("{name} on {ranks} ranks"));
            // The check itself fails the job above 1e-12; the figure is printed for the log.
            let line = job.stdout.lines().find(|l| l.contains("rank 0")).unwrap();
            eprintln!("{name}, {ranks} ranks: {line}");
        }
    }
}

#[test]
fn a_failing_rank_aborts_the_job_with_a_message_naming_it() {
    let Some(mpirun) = mpirun() else { return };
    let job = run(&mpirun, 2, &["fail-rank", "1"]);
    assert!(!job.success, "the job should fail:\n{}", job.stdout);
    assert!(
        job.stderr.contains(
            "kusari-mn: rank 1 of 2 failed: fail-rank on rank 1: this rank fails on purpose"
        ),
        "{}",
        job.stderr
    );
    assert!(
        !job.stdout.contains("should not be reached"),
        "{}",
        job.stdout
    );
}

#[test]
fn ranks_with_different_models_are_told_so_instead_of_deadlocking() {
    let Some(mpirun) = mpirun() else { return };
    let job = run(&mpirun, 2, &["mismatch"]);
    assert!(!job.success, "the job should fail:\n{}", job.stdout);
    assert!(
        job.stderr
            .contains("the ranks disagree: rank 0 has 4 parameters")
            && job.stderr.contains("rank 1 has 6"),
        "{}",
        job.stderr
    );
}

/// The NCCL stand-in connects threads of one process: a job of processes on emulated devices
/// is refused on every rank at once, saying so, instead of waiting for ranks it cannot reach.
///
/// Every rank returns the error, but `mpirun` ends the job when the first rank exits, so the
/// other rank's message may never reach its output: the test asks for at least one rank's
/// message, and that no rank's message says anything else.
#[cfg(feature = "nccl")]
#[test]
fn pure_nccl_on_emulated_devices_across_processes_says_why_it_cannot() {
    let Some(mpirun) = mpirun() else { return };
    let env = [("KUSARI_CUDA_EMULATE", "2")];
    let job = run_with(&mpirun, 2, &["equivalence", "pure_nccl"], &env);
    assert!(!job.success, "the job should fail:\n{}", job.stdout);
    let told: Vec<&str> = job
        .stderr
        .lines()
        .filter(|l| l.contains("create_communicator(\"pure_nccl\") on rank"))
        .collect();
    assert!(!told.is_empty(), "no rank said why:\n{}", job.stderr);
    for line in &told {
        assert!(
            line.contains(": rank 0 cannot join: "),
            "a rank gave another reason: {line}\n{}",
            job.stderr
        );
    }
    assert!(
        job.stderr
            .contains("threads of one process, not mpi processes")
            || job.stderr.contains("NCCL cannot run"),
        "{}",
        job.stderr
    );
}
