//! A socket's home: the actix worker thread that accepted it, and a queue of
//! fan-out work that runs there. A tick's statuses are handed to each home
//! in one job and encoded and written there, so a tick's work is spread
//! over the workers (one per core) without threads of its own, and each
//! socket is written by the thread that serves the rest of its connection:
//! a frame that has to wait in its lane wakes the relay with a push on the
//! thread's own run queue, not a locked queue push and an `eventfd` write.
//!
//! What it saves: against two fan-out threads spawned per tick, the node's
//! user time in a 12 s profile of a 19,000-socket hold fell from 1,665 to
//! 1,431 samples, and memory per held socket from 9.2 to 8.5 KiB
//! (BENCHMARKS.md, issue 14, "after the lane": "homes alone"). Measured
//! before the lane, when every status woke its relay; how much of it the
//! lane leaves is not measured on its own.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;

use super::tasks::Tasks;

/// Work for one home: it runs there, one job after another.
pub type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

pub struct Home {
    id: usize,
    jobs: mpsc::UnboundedSender<Job>,
}

static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static HERE: RefCell<Option<Arc<Home>>> = const { RefCell::new(None) };
}

impl Home {
    /// The calling thread's home, whose runner starts on first use. Call it
    /// from a task on an actix worker (a tokio `LocalSet`). A home whose
    /// runner ended (its application shut down) is replaced.
    pub fn here(tasks: &Tasks) -> Arc<Home> {
        HERE.with(|here| {
            let mut here = here.borrow_mut();
            if let Some(home) = here.as_ref().filter(|home| !home.jobs.is_closed()) {
                return home.clone();
            }
            let (jobs, queue) = mpsc::unbounded_channel();
            let home = Arc::new(Home {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                jobs,
            });
            tasks.spawn_local(run(queue, tasks.clone()));
            *here = Some(home.clone());
            home
        })
    }

    /// Tells homes apart: a batch is split by it.
    pub fn id(&self) -> usize {
        self.id
    }

    /// Queues `job` to run at home; gives it back if the home has stopped.
    pub fn run(&self, job: Job) -> Result<(), Job> {
        self.jobs.send(job).map_err(|refused| refused.0)
    }
}

/// Runs a home's jobs in the order they came, until shutdown.
async fn run(mut queue: mpsc::UnboundedReceiver<Job>, tasks: Tasks) {
    let shutdown = tasks.shutdown_token();
    loop {
        tokio::select! {
            job = queue.recv() => match job {
                Some(job) => job.await,
                None => return,
            },
            () = shutdown.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[tokio::test]
    async fn jobs_run_on_the_home_thread_in_order_and_a_stopped_home_is_replaced() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let tasks = Tasks::new();
                let home = Home::here(&tasks);
                assert_eq!(Home::here(&tasks).id(), home.id(), "one home per thread");
                let ran = Arc::new(Mutex::new(Vec::new()));
                let (done, finished) = tokio::sync::oneshot::channel();
                let thread = std::thread::current().id();
                let mut done = Some(done);
                for n in 0..3 {
                    let ran = ran.clone();
                    let done = if n == 2 { done.take() } else { None };
                    let job: Job = Box::pin(async move {
                        tokio::task::yield_now().await;
                        ran.lock().unwrap().push((n, std::thread::current().id()));
                        if let Some(done) = done {
                            let _ = done.send(());
                        }
                    });
                    // Queued from another thread, as the hub's fan-out does.
                    let home = home.clone();
                    std::thread::spawn(move || assert!(home.run(job).is_ok()))
                        .join()
                        .unwrap();
                }
                finished.await.unwrap();
                assert_eq!(
                    *ran.lock().unwrap(),
                    vec![(0, thread), (1, thread), (2, thread)]
                );

                assert!(tasks.shut_down(std::time::Duration::from_secs(5)).await);
                assert!(home.run(Box::pin(async {})).is_err(), "its runner ended");
                let again = Home::here(&Tasks::new());
                assert_ne!(again.id(), home.id());
            })
            .await;
    }
}
