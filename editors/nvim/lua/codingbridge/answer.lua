-- :CodingBridge answer — Claude's AskUserQuestion, one question at a time:
-- a choice through vim.ui.select, free text through vim.ui.input.
local cb = require('codingbridge')
local state = require('codingbridge.state')

local M = {}

local function say(msg, level)
  vim.notify(msg, level or vim.log.levels.INFO, { title = 'CodingBridge' })
end

-- done(list of QuestionRequest) for the sessions given, one session.get each.
local function collect(ids, done)
  local found, left = {}, #ids
  if left == 0 then return done(found) end
  for _, id in ipairs(ids) do
    cb.conn:request('session.get', { sessionId = id }, function(err, r)
      if not err then vim.list_extend(found, r.session.pendingQuestions) end
      left = left - 1
      if left == 0 then done(found) end
    end)
  end
end

local function ask_one(q, done)
  local prompt = (state.v(q.header) and (q.header .. ': ') or '') .. q.question
  local options = state.v(q.options) or {}
  if #options == 0 then
    return vim.ui.input({ prompt = prompt .. ' ' }, done)
  end
  vim.ui.select(options, {
    prompt = prompt,
    format_item = function(o)
      local d = state.v(o.description)
      return d and (o.label .. ' — ' .. d) or o.label
    end,
    kind = 'codingbridge.question',
  }, function(o) done(o and o.label) end)
end

-- Asks every question of the request in turn, then sends the answers.
local function answer(req)
  local answers, i = {}, 0
  local function next_question()
    i = i + 1
    local q = req.questions[i]
    if not q then
      return cb.conn:request('question.answer', { questionId = req.questionId, answers = answers },
        function(err, r)
          if err then return say(err.message, vim.log.levels.ERROR) end
          say(r.status == 'accepted' and 'Answer sent' or ('Not sent: ' .. r.status))
          cb.refresh()
        end)
    end
    ask_one(q, function(choice)
      if not choice or choice == '' then return say('No answer sent') end
      answers[q.question] = choice
      next_question()
    end)
  end
  next_question()
end

local function pick(reqs)
  if #reqs == 0 then return say('No question is pending') end
  if #reqs == 1 then return answer(reqs[1]) end
  vim.ui.select(reqs, {
    prompt = 'Question:',
    format_item = function(r)
      local s = state.sessions[r.sessionId]
      return (s and state.name(s.s) or r.sessionId) .. ' · ' .. r.questions[1].question
    end,
  }, function(r) if r then answer(r) end end)
end

function M.run(session_id)
  if session_id then return collect({ session_id }, pick) end
  local ids = {}
  for id, e in pairs(state.sessions) do
    if e.s.pendingQuestionCount > 0 then table.insert(ids, id) end
  end
  collect(ids, pick)
end

return M
