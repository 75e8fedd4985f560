#pragma once
// Asio parts (executors, strands, descriptors) held by objects whose last reference may go
// on any thread: the destroyer thread, or after the user destroyed the execution context.
// Destroying a strand or a descriptor after its context is gone touches freed memory, so
// such objects register with a service in the context, and its shutdown takes their Asio
// parts from them (compiled in src/common/context_bound.cpp).
#include <boost/asio/any_io_executor.hpp>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace boost::asio {
class io_context;
} // namespace boost::asio

namespace rdmacm::detail {

// The io_context's own executor under `ex` where `ex` shows it: `ex` itself, a strand of it,
// or a pooled connection's strand over an executor that follows the connection to another
// shard (and ignores outstanding_work.tracked). Any other executor: `ex` itself. What
// serves a whole context runs on, and keeps it running by: not one object's executor.
boost::asio::any_io_executor context_executor(const boost::asio::any_io_executor& ex);
// Whether this thread runs the io_context `ex` runs on (false when that is not known: a
// user's executor of another kind). Destroying that context meanwhile is the user's error:
// a thread is in its run().
bool runs_in_this_thread(const boost::asio::any_io_executor& ex);
// Whether `a` and `b` run on one execution context (asked of the executors only: either
// context may be gone). False when either is empty.
bool same_context(const boost::asio::any_io_executor& a, const boost::asio::any_io_executor& b) noexcept;

// Outstanding work held on an execution context. On an io_context's own executor its work
// count alone (io_context::executor_type::on_work_started/finished: two atomic operations);
// on any other, a tracked copy of the executor (Boost 1.81's any_io_executor allocates to
// make one, and again to be asked whether it tracks). Let go of as it goes.
class context_work {
public:
    context_work() = default;
    // Work on `ex`'s context; empty when `ex` cannot track work (a user's executor that
    // ignores outstanding_work.tracked).
    static context_work on(const boost::asio::any_io_executor& ex);
    context_work(context_work&& other) noexcept
        : counted_(std::exchange(other.counted_, nullptr)), tracked_(std::move(other.tracked_)) {}
    context_work& operator=(context_work&& other) noexcept {
        context_work(std::move(other)).swap(*this);
        return *this;
    }
    ~context_work();
    explicit operator bool() const noexcept { return counted_ || tracked_; }

private:
    void swap(context_work& other) noexcept {
        std::swap(counted_, other.counted_);
        std::swap(tracked_, other.tracked_);
    }
    boost::asio::io_context* counted_ = nullptr;
    boost::asio::any_io_executor tracked_;
};

// An object holding handlers whose context may shut down first (an id, a queue pair): told
// so after the shutdown, it lets go of them, as Asio's services destroy the operations of
// their I/O objects — a handler holding its object (a coroutine frame suspended on it) is
// otherwise a cycle that nothing breaks.
class context_user {
public:
    virtual void context_gone() noexcept = 0;

protected:
    ~context_user() = default;
};

class context_bound {
public:
    // An execution context's state, shared with its service: whether it lives, and what is
    // bound to it. Bound objects touch their Asio parts only under this mutex while the
    // context lives — except for a call into the context (a post through the user's
    // executor, which may run their code): made outside the mutex, with the parts it needs
    // copied under it, and counted, so that the shutdown waits for it.
    struct state {
        std::mutex mutex;
        std::condition_variable calls_done;
        bool alive = true;     // its members hold their Asio parts
        bool closing = false;  // its shutdown began: no call into it starts
        std::size_t calls = 0; // calls into it in progress
        std::vector<context_bound*> members;
        // Outstanding work, counted once for the context while any member is busy: held
        // here (on context_executor() of the first busy member's that can track work)
        // instead of in each member.
        std::size_t busy = 0;
        context_work work;

        // Under the mutex, while alive: member `ex` (its executor) went busy, or one went
        // idle (returns the work that lets go of, for the caller to drop outside its locks).
        void work_started(const boost::asio::any_io_executor& ex);
        context_work work_finished() noexcept;

        // Under the mutex. O(1) both ways (each member knows its index): a context with
        // thousands of connections pays nothing per id made, moved or destroyed.
        void add(context_bound* m) {
            members.push_back(m);
            m->member_index_ = members.size() - 1;
        }
        bool remove(context_bound* m) noexcept { // false (a no-op) if `m` is not a member
            const std::size_t i = m->member_index_;
            if (i >= members.size() || members[i] != m) return false;
            members[i] = members.back();
            members[i]->member_index_ = i;
            members.pop_back();
            m->member_index_ = not_a_member;
            return true;
        }
    };
    // The state of the context `ex` runs on (its service made on first use).
    static std::shared_ptr<state> state_of(const boost::asio::any_io_executor& ex);

    // A call into a context in progress: counted (under the state's mutex, while its
    // shutdown has not begun) from its start to its end; the shutdown waits until none is
    // left, so that the context is not destroyed under the call. (The state is the
    // context's service's, which the shutdown's wait keeps: a plain pointer holds it.)
    class call_in_progress {
    public:
        call_in_progress() = default;
        explicit call_in_progress(state& context) noexcept : context_(&context) {
            ++context_->calls; // (under its mutex)
        }
        call_in_progress(call_in_progress&& other) noexcept : context_(std::exchange(other.context_, nullptr)) {}
        call_in_progress& operator=(call_in_progress&& other) noexcept {
            end();
            context_ = std::exchange(other.context_, nullptr);
            return *this;
        }
        ~call_in_progress() { end(); }
        // Whether a call is counted: no user code may run before it ends (it could destroy
        // the context, whose shutdown would wait for this very call).
        explicit operator bool() const noexcept { return context_ != nullptr; }

    private:
        void end() noexcept {
            if (!context_) return;
            std::lock_guard lock(context_->mutex);
            if (--context_->calls == 0 && context_->closing) context_->calls_done.notify_all(); // (its waiter)
            context_ = nullptr;
        }
        state* context_ = nullptr;
    };

    context_bound() = default;
    context_bound(const context_bound&) = delete;
    context_bound& operator=(const context_bound&) = delete;

    // The context is shutting down: let go of the Asio parts (the state's mutex is held).
    virtual void context_shutdown() noexcept = 0;
    // Whom to tell once the shutdown has let go of the mutex (called under it).
    virtual std::shared_ptr<context_user> user() const noexcept { return nullptr; }

protected:
    ~context_bound() = default;
    // Under the state's mutex: whether this is one of its members now.
    bool is_member() const noexcept { return member_index_ != not_a_member; }

private:
    static constexpr std::size_t not_a_member = static_cast<std::size_t>(-1);
    std::size_t member_index_ = not_a_member; // in its state's members, under its mutex
};

// The executor of an I/O object that may move (an id, a queue pair), let go of when its
// context shuts down: the object may be freed on the destroyer thread after the user's
// io_context is gone. As an Asio I/O object does, it keeps outstanding work on that executor
// while an operation of the object waits (busy), so that the context's run() waits for it,
// and a move takes the work along to the new executor. The owner serialises get, set and
// set_busy (under a mutex of its own); a shutdown of the context may come at any time.
class bound_executor final : public context_bound {
public:
    explicit bound_executor(const boost::asio::any_io_executor& ex) { bind(ex); }
    ~bound_executor() { unbind(); }

    // Told when the context shuts down (from then on: a shutdown may read it at once).
    void set_user(std::weak_ptr<context_user> u) noexcept;

    // A copy; empty once the context has shut down (nothing runs there any more).
    boost::asio::any_io_executor get() const noexcept;
    // Moves to `ex`, and the work with it; returns what get() now would (empty if that
    // context has shut down).
    boost::asio::any_io_executor set(const boost::asio::any_io_executor& ex);
    // Whether an operation of the object waits: work is kept on the executor while it does.
    void set_busy(bool busy) noexcept;
    // get() and set_busy(busy) in one: for handlers just taken from the object. The work that
    // going idle lets go of comes back in `idle_work`, for the caller to drop once it has
    // handed them over (a post makes work of its own), not under another lock taken again.
    // Made from a thread that runs context `here` (null: not known): a hand-over into
    // another context — one this thread does not run — is a call into it, which its
    // shutdown waits for: the user may close the object and destroy its context meanwhile
    // (fresh review F2). No handler may run inline while it is counted (D1). No executor once the
    // context's shutdown began (nothing runs there any more), but a call still: the caller
    // lets go of the handlers it took before its hand-over ends (declare it first).
    struct handover {
        call_in_progress call; // (first: it ends last, after the idle work is let go of)
        boost::asio::any_io_executor executor;
        context_work idle_work;
    };
    handover get_for_handover(bool busy, const state* here) noexcept;
    // The executor to post to, with the call into its context that the post is: counted
    // (unless this thread runs that context), so that a shutdown on another thread waits
    // until the caller has posted and let go of the copy (declare it before what the post
    // takes along). Once the shutdown has begun, no executor (nothing runs there any more)
    // but a call all the same, as get_for_handover's: what the caller holds for that
    // context goes before the context may be freed (the fourth review's R2). Neither once
    // the shutdown is done.
    struct entry {
        call_in_progress call; // (first: it ends last)
        boost::asio::any_io_executor executor;
    };
    entry enter() const noexcept;
    // enter(), and whether `other` runs on the context this object's executor runs on,
    // asked in the same hold of the state's lock (the context lives then: its shutdown, if
    // it has begun, waits for the call, and the entry has no executor). False once it is done.
    entry enter(const boost::asio::any_io_executor& other, bool& on_its_context) const noexcept;
    // An entry held across a wait (a move's kernel call): its executor is let go of if the
    // context's shutdown began meanwhile (the shutdown waits for the call it keeps).
    void recheck(entry& e) const noexcept;

    void context_shutdown() noexcept override { executor_ = {}; }
    std::shared_ptr<context_user> user() const noexcept override { return user_.lock(); }

private:
    boost::asio::any_io_executor bind(const boost::asio::any_io_executor& ex);
    entry enter_locked() const noexcept; // (under the state's mutex)
    // Under the state's mutex: the work going idle lets go of (empty otherwise).
    context_work switch_work(bool busy) noexcept;
    void unbind() noexcept;

    std::shared_ptr<state> state_;
    boost::asio::any_io_executor executor_;
    bool busy_ = false; // counted in state_->busy while the context lives
    std::weak_ptr<context_user> user_;
};

} // namespace rdmacm::detail
