-- vim.notify for what needs the person: approvals, questions, a task done or
-- failed. Derived from session changes rather than the server's
-- notification.post / banner.show: those follow the phone app's phase
-- (foreground: banners only, no "Task Complete"), which the editor must not
-- set for everyone.
local state = require('codingbridge.state')

local M = {}

local levels = vim.log.levels
local seen = {} -- approval and question ids already announced

local function post(title, session, body, level)
  vim.notify(('%s — %s: %s'):format(title, state.name(session), body), level, { title = 'CodingBridge' })
end

local function announce_approvals(conn, s)
  conn:request('approval.list', { sessionId = s.id }, function(err, r)
    if err then return end
    for _, a in ipairs(r.approvals) do
      if not seen[a.requestId] then
        seen[a.requestId] = true
        post('Approval Needed', s, ('%s: %s (%d s left)'):format(a.toolName, a.summary,
          math.floor(a.remainingSeconds)), levels.WARN)
      end
    end
  end)
end

local function announce_questions(conn, s)
  conn:request('session.get', { sessionId = s.id }, function(err, r)
    if err then return end
    for _, q in ipairs(r.session.pendingQuestions) do
      if not seen[q.questionId] then
        seen[q.questionId] = true
        post('Claude has a question', s, q.questions[1].question, levels.WARN)
      end
    end
  end)
end

-- old: the summary before (nil for a session seen for the first time, whose
-- past completion is not news; its pending approvals still are).
function M.changed(conn, old, new)
  if new.pendingApprovalCount > (old and old.pendingApprovalCount or 0) then
    announce_approvals(conn, new)
  end
  if new.pendingQuestionCount > (old and old.pendingQuestionCount or 0) then
    announce_questions(conn, new)
  end
  if not old or old.status == new.status then return end
  local message = state.v(new.message)
  if new.status == 'completed' then
    post('Task Complete', new, message or 'Claude finished working', levels.INFO)
  elseif new.status == 'error' then
    post('Task Failed', new, message or 'Something went wrong', levels.ERROR)
  end
end

return M
