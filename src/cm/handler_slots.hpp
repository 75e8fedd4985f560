#pragma once
// The handlers of an id's outstanding operations: one slot per op_kind, each of the one
// handler type its kind completes with. (An array of id_handle::any_handler, a variant each,
// costs every id 48 bytes more, most of its life holding nothing.)
#include "rdmacm/detail/id_machine.hpp"
#include "rdmacm/detail/id_handle.hpp"

#include <utility>
#include <variant>

namespace rdmacm::detail {

class handler_slots {
    // f(the slot of `k`)
    template <typename Self, typename F>
    static decltype(auto) visit(Self& self, op_kind k, F&& f) {
        switch (k) {
        case op_kind::resolve_address: return f(self.resolve_address_);
        case op_kind::resolve_route: return f(self.resolve_route_);
        case op_kind::establish: return f(self.establish_);
        case op_kind::disconnect: return f(self.disconnect_);
        case op_kind::request: return f(self.request_);
        case op_kind::next_event: break;
        }
        return f(self.next_event_);
    }

public:
    using any_handler = id_handle::any_handler;

    bool holds(op_kind k) const noexcept {
        return visit(*this, k, [](auto& slot) { return slot != nullptr; });
    }
    bool any() const noexcept { // (every slot at once: asked on every event and start)
        return !(resolve_address_ == nullptr && resolve_route_ == nullptr && disconnect_ == nullptr &&
                 establish_ == nullptr && next_event_ == nullptr && request_ == nullptr);
    }
    // Into an empty slot: `h` holds the kind's handler type (its start() is typed so).
    void put(op_kind k, any_handler h) noexcept {
        visit(*this, k, [&](auto& slot) { slot = std::get<std::decay_t<decltype(slot)>>(std::move(h)); });
    }
    // Empties the slot: what it held (monostate if nothing).
    any_handler take(op_kind k) noexcept {
        return visit(*this, k, [](auto& slot) -> any_handler {
            if (slot == nullptr) return {};
            return std::exchange(slot, nullptr);
        });
    }

private:
    id_handle::void_handler resolve_address_, resolve_route_, disconnect_;
    id_handle::event_handler establish_, next_event_;
    id_handle::request_handler request_;
};

} // namespace rdmacm::detail
